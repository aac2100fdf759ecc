//! The `steward` program, built inside the envtest crate so that cargo
//! rebuilds it before the integration tests run (same entry point as the
//! real binary: `steward::cli::main`).

fn main() -> std::process::ExitCode {
    steward::cli::main()
}
