//! `steward events [-w] [-o table|wide|json|yaml]`: the running controller's
//! event log, oldest first; with `-w`, then each new or repeated event as it
//! happens.

use std::process::ExitCode;
use std::time::SystemTime;

use super::client::{REQUEST_TIMEOUT, need_controller, runtime};
use super::{CommandError, Io};
use crate::cli::args::EventsArgs;
use crate::cli::output::{self, EventList, Format, Table};
use crate::control::{ControlError, client};
use crate::observe::events::Event;
use crate::support::paths::Paths;

pub fn run(
    paths: &Paths,
    args: &EventsArgs,
    now: SystemTime,
    io: &mut Io<'_>,
) -> Result<ExitCode, CommandError> {
    let rt = runtime()?;
    let socket = paths.socket_path();
    let no_controller = |e| need_controller(paths, e);
    if !args.watch {
        let events = rt
            .block_on(client::events(&socket, REQUEST_TIMEOUT))
            .map_err(no_controller)?;
        match args.output {
            Format::Json => {
                let mut text = serde_json::to_string_pretty(&EventList::new(&events))
                    .map_err(output::OutputError::from)?;
                text.push('\n');
                io.out.write_all(text.as_bytes())?;
            }
            Format::Yaml => {
                let text = yaml_serde::to_string(&EventList::new(&events))
                    .map_err(output::OutputError::from)?;
                io.out.write_all(text.as_bytes())?;
            }
            Format::Table | Format::Wide => {
                if events.is_empty() {
                    writeln!(io.err, "no events yet")?;
                }
                let text = output::render_events(&events, args.output == Format::Wide, now);
                io.out.write_all(text.as_bytes())?;
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    let mut stream = rt
        .block_on(client::watch_events(&socket))
        .map_err(no_controller)?;
    let wide = args.output == Format::Wide;
    let mut table = Table::for_watch(output::event_header(wide));
    let mut header_printed = false;
    loop {
        let events: Vec<Event> = match rt.block_on(stream.next()) {
            None | Some(Err(ControlError::Closed)) => {
                writeln!(io.err, "the controller stopped")?;
                return Ok(ExitCode::SUCCESS);
            }
            Some(Err(e)) => return Err(e.into()),
            Some(Ok(events)) => events,
        };
        // A watch prints times relative to when each line is printed.
        let now = SystemTime::now();
        for event in &events {
            match args.output {
                Format::Json => {
                    let text = serde_json::to_string(event).map_err(output::OutputError::from)?;
                    writeln!(io.out, "{text}")?;
                }
                Format::Yaml => {
                    let text = yaml_serde::to_string(event).map_err(output::OutputError::from)?;
                    write!(io.out, "---\n{text}")?;
                }
                Format::Table | Format::Wide => {
                    let row = output::event_row(event, wide, now);
                    table.fit(std::slice::from_ref(&row));
                    if !header_printed {
                        write!(io.out, "{}", table.header_line())?;
                        header_printed = true;
                    }
                    write!(io.out, "{}", table.line(&row))?;
                }
            }
        }
        io.out.flush()?;
    }
}
