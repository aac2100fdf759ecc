//! The `steward` binary (see [`steward::cli`]).

// `BUILT_FROM`: the commit this binary is built from (see build.rs).
include!(concat!(env!("OUT_DIR"), "/built_from.rs"));

fn main() -> std::process::ExitCode {
    steward::cli::version::record(BUILT_FROM);
    steward::cli::main()
}
