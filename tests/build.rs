//! The build script of the tests' `steward-under-test`: the commit it is
//! built from, exactly as the real binary's (`controller/build.rs`).

#[path = "../controller/build/built_from.rs"]
mod built_from;

fn main() {
    built_from::write();
}
