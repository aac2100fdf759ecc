//! What the process unit tests share: a shell spec, a spawner (that spawns
//! nothing here: the tests that run processes are integration tests), and
//! writing a file with a mode.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::{ProcessSpec, Spawner};

pub(super) fn sh(script: &str) -> ProcessSpec {
    ProcessSpec {
        program: "/bin/sh".to_owned(),
        args: vec!["-c".to_owned(), script.to_owned()],
        ..ProcessSpec::default()
    }
}

pub(super) fn spawner() -> Spawner {
    Spawner::new().expect("start the spawner thread")
}

pub(super) fn write_executable(path: &Path, mode: u32) {
    fs::write(path, "#!/bin/sh\nexit 0\n").expect("write file");
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).expect("chmod");
}
