//! The LDF grammar (LIN 2.x specification, section 9), read by recursive
//! descent over the lexer's tokens into [`Parts`], which `check.rs` makes an `Ldf`. Sections the hub uses
//! are read in full; the other sections of the specification are checked
//! for balanced braces and read over; anything else is refused, naming
//! where it is and what an LDF has there. Nesting is counted, not
//! recursed, so no input exhausts the stack.

use crate::error::{LdfError, Pos};
use crate::lexer::Tok;
use crate::model::{Entry, EventTriggeredFrame, Frame, Publisher, ScheduleTable, SporadicFrame};

/// Sections the hub reads over: signals, encodings, node composition.
const SKIPPED: [&str; 7] = [
    "Node_composition",
    "Signals",
    "Diagnostic_signals",
    "Signal_groups",
    "Signal_encoding_types",
    "Signal_representation",
    "Dynamic_frames",
];

/// The sections and assignments an LDF has, for messages.
const KNOWN: &str = "LIN_protocol_version, LIN_language_version, LIN_speed, Channel_name, Nodes, \
Node_composition, Signals, Diagnostic_signals, Frames, Sporadic_frames, Event_triggered_frames, \
Diagnostic_frames, Node_attributes, Schedule_tables, Signal_groups, Signal_encoding_types, \
Signal_representation";

pub struct Parser<'a> {
    toks: Vec<(Tok<'a>, Pos)>,
    at: usize,
    /// The end of the text, for "the file ends" messages.
    end: Pos,
}

/// What the header and sections gave, before the cross-checks.
#[derive(Default)]
pub struct Parts {
    pub protocol_version: Option<(String, Pos)>,
    pub language_version: Option<String>,
    pub speed_bps: Option<u32>,
    pub channel_name: Option<String>,
    pub master: Option<(String, Pos)>,
    pub slaves: Vec<(String, Pos)>,
    pub frames: Vec<Frame>,
    pub node_protocols: Vec<(String, String)>,
    pub event_triggered_frames: Vec<EventTriggeredFrame>,
    pub sporadic_frames: Vec<SporadicFrame>,
    pub schedule_tables: Vec<ScheduleTable>,
    /// Schedule entries that are node configuration commands: name, place.
    pub commands: Vec<(String, Pos)>,
}

impl<'a> Parser<'a> {
    pub fn new(toks: Vec<(Tok<'a>, Pos)>, end: Pos) -> Self {
        Self { toks, at: 0, end }
    }

    fn peek(&self) -> Option<&Tok<'a>> {
        self.toks.get(self.at).map(|(t, _)| t)
    }

    /// The place of the next token (the end of the text after the last).
    fn pos(&self) -> Pos {
        self.toks.get(self.at).map_or(self.end, |(_, p)| *p)
    }

    fn next(&mut self, inside: &str) -> Result<(Tok<'a>, Pos), LdfError> {
        let tok = self.toks.get(self.at).cloned().ok_or_else(|| {
            LdfError::at(self.end, format!("the file ends inside {inside}; it is cut short or a '}}' is missing"))
        })?;
        self.at += 1;
        Ok(tok)
    }

    fn unexpected(tok: &Tok<'_>, pos: Pos, wanted: &str, inside: &str) -> LdfError {
        LdfError::at(pos, format!("{} where {wanted} belongs, in {inside}", tok.describe()))
    }

    fn punct(&mut self, c: char, inside: &str) -> Result<Pos, LdfError> {
        match self.next(inside)? {
            (Tok::Punct(p), pos) if p == c => Ok(pos),
            (tok, pos) => Err(Self::unexpected(&tok, pos, &format!("'{c}'"), inside)),
        }
    }

    fn eat(&mut self, c: char) -> bool {
        let found = self.peek() == Some(&Tok::Punct(c));
        self.at += usize::from(found);
        found
    }

    fn ident(&mut self, inside: &str) -> Result<(&'a str, Pos), LdfError> {
        match self.next(inside)? {
            (Tok::Ident(name), pos) => Ok((name, pos)),
            (tok, pos) => Err(Self::unexpected(&tok, pos, "a name", inside)),
        }
    }

    fn keyword(&mut self, word: &str, inside: &str) -> Result<(), LdfError> {
        match self.next(inside)? {
            (Tok::Ident(w), _) if w == word => Ok(()),
            (tok, pos) => Err(Self::unexpected(&tok, pos, &format!("'{word}'"), inside)),
        }
    }

    fn string(&mut self, inside: &str) -> Result<String, LdfError> {
        match self.next(inside)? {
            (Tok::Str(text), _) => Ok(text.to_owned()),
            (tok, pos) => Err(Self::unexpected(&tok, pos, "a \"string\"", inside)),
        }
    }

    fn number(&mut self, inside: &str) -> Result<(&'a str, Pos), LdfError> {
        match self.next(inside)? {
            (Tok::Number(text), pos) => Ok((text, pos)),
            (tok, pos) => Err(Self::unexpected(&tok, pos, "a number", inside)),
        }
    }

    /// An integer (decimal or `0x` hexadecimal) of at most `max`.
    fn integer(&mut self, max: u64, what: &str, inside: &str) -> Result<u64, LdfError> {
        let (text, pos) = self.number(inside)?;
        let value = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => text.parse::<u64>().ok(),
        };
        match value {
            Some(v) if v <= max => Ok(v),
            Some(_) => Err(LdfError::at(pos, format!("{what} {text} is over {max}, in {inside}"))),
            None => Err(LdfError::at(
                pos,
                format!("{what} '{text}' is not a whole number (decimal or 0x hex), in {inside}"),
            )),
        }
    }

    /// A decimal with up to `places` digits after the point, scaled by
    /// 10^places (19.2 with 3 places: 19,200), of at most `max` scaled.
    fn fixed(&mut self, places: u32, max: u64, what: &str, inside: &str) -> Result<u64, LdfError> {
        let (text, pos) = self.number(inside)?;
        let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
        let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        let bad = || {
            LdfError::at(
                pos,
                format!(
                    "{what} '{text}' is not a decimal number with at most {places} digits after the point, in {inside}"
                ),
            )
        };
        if whole.is_empty() || !digits(whole) || !digits(fraction) || fraction.len() > places as usize {
            return Err(bad());
        }
        let scale = 10u64.pow(places);
        let padded = format!("{fraction:0<width$}", width = places as usize);
        let value = whole
            .parse::<u64>()
            .ok()
            .and_then(|w| w.checked_mul(scale))
            .and_then(|w| w.checked_add(padded.parse::<u64>().unwrap_or(0)));
        match value {
            Some(v) if v <= max => Ok(v),
            _ => Err(LdfError::at(pos, format!("{what} {text} is too large (at most {}), in {inside}", max / scale))),
        }
    }

    /// Read over a `{ … }` block whose `{` was just read.
    fn skip_block(&mut self, inside: &str) -> Result<(), LdfError> {
        let mut depth = 1usize;
        while depth > 0 {
            match self.next(inside)?.0 {
                Tok::Punct('{') => depth += 1,
                Tok::Punct('}') => depth -= 1,
                _ => {}
            }
        }
        Ok(())
    }

    /// Read over everything up to and with the next `;` at this level.
    fn skip_statement(&mut self, inside: &str) -> Result<(), LdfError> {
        loop {
            match self.next(inside)? {
                (Tok::Punct(';'), _) => return Ok(()),
                (Tok::Punct('{'), _) => self.skip_block(inside)?,
                (Tok::Punct('}'), pos) => {
                    return Err(LdfError::at(pos, format!("'}}' before the ';' that ends a statement, in {inside}")))
                }
                _ => {}
            }
        }
    }

    /// The whole file.
    pub fn file(&mut self) -> Result<Parts, LdfError> {
        let mut parts = Parts::default();
        let start = self.pos();
        match self.peek() {
            Some(Tok::Ident("LIN_description_file")) => {
                self.at += 1;
                self.punct(';', "the file's first line")?;
            }
            _ => {
                return Err(LdfError::at(
                    start,
                    "an LDF starts with 'LIN_description_file;'; is this a LIN description file?",
                ))
            }
        }
        while self.at < self.toks.len() {
            let (name, pos) = self.ident("the file's top level")?;
            if self.eat('=') {
                self.assignment(name, pos, &mut parts)?;
                continue;
            }
            if !self.eat('{') {
                let tok = self.peek().cloned().unwrap_or(Tok::Punct(';'));
                return Err(Self::unexpected(
                    &tok,
                    self.pos(),
                    &format!("'=' or '{{' after '{name}'"),
                    "the file's top level",
                ));
            }
            self.section(name, pos, &mut parts)?;
        }
        Ok(parts)
    }

    fn assignment(&mut self, name: &str, pos: Pos, parts: &mut Parts) -> Result<(), LdfError> {
        let inside = name;
        match name {
            "LIN_protocol_version" => parts.protocol_version = Some((self.string(inside)?, pos)),
            "LIN_language_version" => parts.language_version = Some(self.string(inside)?),
            "Channel_name" => parts.channel_name = Some(self.string(inside)?),
            "LIN_speed" => {
                let bps = self.fixed(3, u64::from(u32::MAX), "the speed", inside)?;
                self.keyword("kbps", inside)?;
                parts.speed_bps = Some(bps as u32);
            }
            _ => return Err(LdfError::at(pos, format!("unknown setting '{name}'; an LDF has {KNOWN}"))),
        }
        self.punct(';', inside).map(drop)
    }

    fn section(&mut self, name: &str, pos: Pos, parts: &mut Parts) -> Result<(), LdfError> {
        match name {
            "Nodes" => self.nodes(parts),
            "Frames" => self.frames(parts),
            "Diagnostic_frames" => self.diagnostic_frames(parts),
            "Node_attributes" => self.node_attributes(parts),
            "Schedule_tables" => self.schedule_tables(parts),
            "Event_triggered_frames" => self.event_triggered_frames(parts),
            "Sporadic_frames" => self.sporadic_frames(parts),
            _ if SKIPPED.contains(&name) => self.skip_block(name),
            _ => Err(LdfError::at(pos, format!("unknown section '{name}'; an LDF has {KNOWN}"))),
        }
    }

    fn nodes(&mut self, parts: &mut Parts) -> Result<(), LdfError> {
        let inside = "Nodes";
        while !self.eat('}') {
            let (kind, pos) = self.ident(inside)?;
            self.punct(':', inside)?;
            match kind {
                "Master" => {
                    let (name, at) = self.ident(inside)?;
                    parts.master = Some((name.to_owned(), at));
                    self.skip_statement(inside)?;
                }
                "Slaves" => loop {
                    let (name, at) = self.ident(inside)?;
                    parts.slaves.push((name.to_owned(), at));
                    if !self.eat(',') {
                        self.punct(';', inside)?;
                        break;
                    }
                },
                _ => return Err(LdfError::at(pos, format!("'{kind}' in Nodes, which has 'Master:' and 'Slaves:'"))),
            }
        }
        Ok(())
    }

    fn frames(&mut self, parts: &mut Parts) -> Result<(), LdfError> {
        let inside = "Frames";
        while !self.eat('}') {
            let (name, pos) = self.ident(inside)?;
            self.punct(':', inside)?;
            let id = self.integer(0x3F, "the frame identifier", inside)? as u8;
            self.punct(',', inside)?;
            let publisher = self.ident(inside)?.0.to_owned();
            self.punct(',', inside)?;
            let length = self.integer(8, "the frame length", inside)? as u8;
            if self.eat('{') {
                self.skip_block(inside)?;
            } else {
                self.punct(';', inside)?;
            }
            parts.frames.push(Frame { name: name.to_owned(), id, publisher: Publisher::Node(publisher), length, pos });
        }
        Ok(())
    }

    fn diagnostic_frames(&mut self, parts: &mut Parts) -> Result<(), LdfError> {
        let inside = "Diagnostic_frames";
        while !self.eat('}') {
            let (name, pos) = self.ident(inside)?;
            self.punct(':', inside)?;
            let id = self.integer(0x3F, "the frame identifier", inside)? as u8;
            self.punct('{', inside)?;
            self.skip_block(inside)?;
            let publisher = match (name, id) {
                ("MasterReq", 0x3C) => Publisher::Node(parts.master.as_ref().map_or_else(String::new, |m| m.0.clone())),
                ("SlaveResp", 0x3D) => Publisher::AnySlave,
                _ => {
                    return Err(LdfError::at(
                        pos,
                        format!("diagnostic frame '{name}' with identifier 0x{id:02X}; LIN 2.x has MasterReq: 0x3C and SlaveResp: 0x3D"),
                    ))
                }
            };
            parts.frames.push(Frame { name: name.to_owned(), id, publisher, length: 8, pos });
        }
        Ok(())
    }

    fn node_attributes(&mut self, parts: &mut Parts) -> Result<(), LdfError> {
        let inside = "Node_attributes";
        while !self.eat('}') {
            let (node, _) = self.ident(inside)?;
            self.punct('{', inside)?;
            while !self.eat('}') {
                let (key, _) = self.ident(inside)?;
                if self.eat('{') {
                    // configurable_frames { … }
                    self.skip_block(inside)?;
                    continue;
                }
                self.punct('=', inside)?;
                if key == "LIN_protocol" {
                    let version = self.string(inside)?;
                    parts.node_protocols.push((node.to_owned(), version));
                    self.punct(';', inside)?;
                } else {
                    self.skip_statement(inside)?;
                }
            }
        }
        Ok(())
    }

    /// Frame names after a first one was read: `, name` until `;`.
    fn more_names(&mut self, first: &str, inside: &str) -> Result<Vec<String>, LdfError> {
        let mut names = vec![first.to_owned()];
        while self.eat(',') {
            names.push(self.ident(inside)?.0.to_owned());
        }
        self.punct(';', inside)?;
        Ok(names)
    }

    /// `name : [collision_table ,] id , frame {, frame} ;` (LIN 2.1 9.2.4.3;
    /// LIN 2.0 has no collision table).
    fn event_triggered_frames(&mut self, parts: &mut Parts) -> Result<(), LdfError> {
        let inside = "Event_triggered_frames";
        while !self.eat('}') {
            let (name, pos) = self.ident(inside)?;
            self.punct(':', inside)?;
            let collision_table = match self.peek() {
                Some(Tok::Ident(table)) => {
                    let table = (*table).to_owned();
                    self.at += 1;
                    self.punct(',', inside)?;
                    Some(table)
                }
                _ => None,
            };
            let id = self.integer(0x3F, "the frame identifier", inside)? as u8;
            self.punct(',', inside)?;
            let (first, _) = self.ident(inside)?;
            let frames = self.more_names(first, inside)?;
            parts.event_triggered_frames.push(EventTriggeredFrame {
                name: name.to_owned(),
                id,
                collision_table,
                frames,
                pos,
            });
        }
        Ok(())
    }

    /// `name : frame {, frame} ;` (LIN 2.1 9.2.4.2).
    fn sporadic_frames(&mut self, parts: &mut Parts) -> Result<(), LdfError> {
        let inside = "Sporadic_frames";
        while !self.eat('}') {
            let (name, pos) = self.ident(inside)?;
            self.punct(':', inside)?;
            let (first, _) = self.ident(inside)?;
            let frames = self.more_names(first, inside)?;
            parts.sporadic_frames.push(SporadicFrame { name: name.to_owned(), frames, pos });
        }
        Ok(())
    }

    fn schedule_tables(&mut self, parts: &mut Parts) -> Result<(), LdfError> {
        while !self.eat('}') {
            let (name, pos) = self.ident("Schedule_tables")?;
            let inside = format!("schedule table '{name}'");
            self.punct('{', &inside)?;
            let mut entries = Vec::new();
            while !self.eat('}') {
                let (frame, at) = self.ident(&inside)?;
                if self.eat('{') {
                    // AssignNAD { … }, FreeFormat { … }: a configuration command.
                    self.skip_block(&inside)?;
                    parts.commands.push((frame.to_owned(), at));
                }
                self.keyword("delay", &inside)?;
                let delay_us = self.fixed(3, crate::MAX_DELAY_US, "the delay", &inside)?;
                self.keyword("ms", &inside)?;
                self.punct(';', &inside)?;
                entries.push(Entry { frame: frame.to_owned(), delay_us, pos: at });
            }
            parts.schedule_tables.push(ScheduleTable { name: name.to_owned(), entries, pos });
        }
        Ok(())
    }
}
