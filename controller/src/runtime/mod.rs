//! Runtime: the processes and protocol connections Steward owns.
pub mod process;
