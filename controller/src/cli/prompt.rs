//! Asking the user at the terminal: a line, a secret without echo, a
//! yes/no. The terminal is stdin when it is one, else the controlling
//! terminal (`/dev/tty`: stdin may carry `--secrets-stdin`); without
//! either, nobody can be asked and commands say what to pass instead.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead as _, BufReader, IsTerminal as _, Write as _};
use std::os::fd::AsRawFd as _;

/// A terminal to ask.
pub struct Terminal {
    input: Box<dyn io::BufRead>,
    output: Box<dyn io::Write>,
    fd: i32,
}

impl Terminal {
    /// The terminal, if there is one to ask.
    pub fn open() -> Option<Terminal> {
        if io::stdin().is_terminal() && io::stderr().is_terminal() {
            return Some(Terminal {
                input: Box::new(BufReader::new(io::stdin())),
                output: Box::new(io::stderr()),
                fd: libc::STDIN_FILENO,
            });
        }
        let tty: File = OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty")
            .ok()?;
        let fd = tty.as_raw_fd();
        let out = tty.try_clone().ok()?;
        Some(Terminal {
            input: Box::new(BufReader::new(tty)),
            output: Box::new(out),
            fd,
        })
    }

    /// Writes `text` (a question, a note) to the terminal.
    pub fn say(&mut self, text: &str) -> io::Result<()> {
        self.output.write_all(text.as_bytes())?;
        self.output.flush()
    }

    /// One line, without its line ending.
    pub fn line(&mut self, question: &str) -> io::Result<String> {
        self.say(question)?;
        let mut line = String::new();
        self.input.read_line(&mut line)?;
        Ok(trim_line(&line).to_owned())
    }

    /// One line read with echo off.
    pub fn secret(&mut self, question: &str) -> io::Result<String> {
        self.say(question)?;
        let echo = EchoOff::new(self.fd);
        let mut line = String::new();
        let read = self.input.read_line(&mut line);
        drop(echo);
        self.say("\n")?;
        read?;
        Ok(trim_line(&line).to_owned())
    }

    /// Whether the answer to `question` is yes (anything else is no).
    pub fn confirm(&mut self, question: &str) -> io::Result<bool> {
        let answer = self.line(&format!("{question} [y/N] "))?;
        Ok(matches!(
            answer.trim().to_ascii_lowercase().as_str(),
            "y" | "yes"
        ))
    }
}

/// `line` without one trailing `\n` / `\r\n`.
pub fn trim_line(line: &str) -> &str {
    line.strip_suffix('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .unwrap_or(line)
}

/// The terminal's echo turned off while it lives.
pub struct EchoOff(i32, Option<libc::termios>);

impl EchoOff {
    #[allow(unsafe_code)]
    pub fn new(fd: i32) -> Self {
        // SAFETY: tcgetattr/tcsetattr on a descriptor we hold, with a
        // termios we own.
        unsafe {
            let mut term: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(fd, &mut term) != 0 {
                return EchoOff(fd, None);
            }
            let saved = term;
            term.c_lflag &= !libc::ECHO;
            term.c_lflag |= libc::ECHONL;
            if libc::tcsetattr(fd, libc::TCSANOW, &term) != 0 {
                return EchoOff(fd, None);
            }
            EchoOff(fd, Some(saved))
        }
    }
}

impl Drop for EchoOff {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        if let Some(saved) = &self.1 {
            // SAFETY: restores the attributes read in `new`.
            unsafe {
                libc::tcsetattr(self.0, libc::TCSANOW, saved);
            }
        }
    }
}
