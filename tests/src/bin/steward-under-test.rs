//! The `steward` program, built inside the envtest crate so that cargo
//! rebuilds it before the integration tests run (same entry point as the
//! real binary: `steward::cli::main`, after the same record of the commit
//! it is built from: `tests/build.rs` is `controller/build.rs`).

include!(concat!(env!("OUT_DIR"), "/built_from.rs"));

fn main() -> std::process::ExitCode {
    steward::cli::version::record(BUILT_FROM);
    steward::cli::main()
}
