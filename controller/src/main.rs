//! The `steward` binary (see [`steward::entry`]).

fn main() -> std::process::ExitCode {
    steward::entry::main()
}
