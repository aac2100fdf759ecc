//! The build script of `steward`: the commit `steward --version` prints
//! (see `build/built_from.rs`).

#[path = "build/built_from.rs"]
mod built_from;

fn main() {
    built_from::write();
}
