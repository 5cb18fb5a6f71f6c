//! MDF4 blocks: the 24-byte header, links and data, built into a buffer
//! for writing and taken apart, bounds-checked, for reading.

use crate::LogError;

/// Bytes of a block header: id, reserved, length, link count.
pub(super) const HEADER: usize = 24;

/// A file being laid out in memory: blocks appended at 8-byte boundaries,
/// links patched once their targets are known.
#[derive(Default)]
pub(super) struct Layout {
    pub bytes: Vec<u8>,
}

impl Layout {
    /// Append a block; returns its offset. `links` may hold zeros to patch
    /// with [`Layout::link`].
    pub fn block(&mut self, id: &[u8; 2], links: &[u64], data: &[u8]) -> u64 {
        let offset = self.bytes.len() as u64;
        let length = HEADER + links.len() * 8 + data.len();
        let padded = length.next_multiple_of(8);
        self.bytes.extend_from_slice(b"##");
        self.bytes.extend_from_slice(id);
        self.bytes.extend_from_slice(&[0; 4]);
        self.bytes.extend_from_slice(&(padded as u64).to_le_bytes());
        self.bytes.extend_from_slice(&(links.len() as u64).to_le_bytes());
        for link in links {
            self.bytes.extend_from_slice(&link.to_le_bytes());
        }
        self.bytes.extend_from_slice(data);
        self.bytes.resize(offset as usize + padded, 0);
        offset
    }

    /// A text block (`TX` or `MD`): the text, NUL-terminated.
    pub fn text(&mut self, id: &[u8; 2], text: &str) -> u64 {
        let mut data = text.as_bytes().to_vec();
        data.push(0);
        self.block(id, &[], &data)
    }

    /// Set link `index` of the block at `block` to `target`.
    pub fn link(&mut self, block: u64, index: usize, target: u64) {
        let at = block as usize + HEADER + index * 8;
        self.bytes[at..at + 8].copy_from_slice(&target.to_le_bytes());
    }
}

/// A block read from a file: its links and data borrowed from the input.
pub(super) struct Block<'a> {
    pub id: [u8; 2],
    pub links: Vec<u64>,
    pub data: &'a [u8],
}

impl Block<'_> {
    /// Link `index`, 0 when the block has fewer links.
    pub fn link(&self, index: usize) -> u64 {
        self.links.get(index).copied().unwrap_or(0)
    }
}

/// The error for the block at `offset`.
pub(super) fn bad(offset: u64, message: impl Into<String>) -> LogError {
    LogError::Mdf4 { offset, message: message.into() }
}

/// Read the block at `offset`, which must have id `##` + one of `ids`.
pub(super) fn read<'a>(file: &'a [u8], offset: u64, ids: &[&[u8; 2]]) -> Result<Block<'a>, LogError> {
    let names =
        || ids.iter().map(|id| format!("##{}", String::from_utf8_lossy(&id[..]))).collect::<Vec<_>>().join(" or ");
    let start = usize::try_from(offset).ok().filter(|&s| s % 8 == 0 && s + HEADER <= file.len());
    let Some(start) = start else {
        return Err(bad(
            offset,
            format!("a link points outside the file (or off an 8-byte boundary) where {} was expected", names()),
        ));
    };
    let header = &file[start..start + HEADER];
    let id = [header[2], header[3]];
    if &header[..2] != b"##" || !ids.iter().any(|want| **want == id) {
        return Err(bad(
            offset,
            format!("expected a {} block, found {:?}", names(), String::from_utf8_lossy(&header[..4])),
        ));
    }
    let length = u64::from_le_bytes(header[8..16].try_into().expect("8 bytes"));
    let link_count = u64::from_le_bytes(header[16..24].try_into().expect("8 bytes"));
    let end = usize::try_from(length).ok().and_then(|l| start.checked_add(l)).filter(|&e| e <= file.len());
    let Some(end) = end else {
        return Err(bad(offset, format!("block length {length} runs past the end of the file")));
    };
    let links_end = usize::try_from(link_count)
        .ok()
        .and_then(|n| n.checked_mul(8))
        .and_then(|n| n.checked_add(start + HEADER))
        .filter(|&e| e <= end);
    let Some(links_end) = links_end else {
        return Err(bad(offset, format!("{link_count} links do not fit the block's {length} bytes")));
    };
    let links = file[start + HEADER..links_end]
        .chunks_exact(8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        .collect();
    Ok(Block { id, links, data: &file[links_end..end] })
}

/// Little-endian fields of a block's data, checked against its length.
pub(super) struct Fields<'a> {
    pub offset: u64,
    pub data: &'a [u8],
}

impl Fields<'_> {
    pub fn bytes(&self, at: usize, len: usize) -> Result<&[u8], LogError> {
        self.data
            .get(at..at + len)
            .ok_or_else(|| bad(self.offset, format!("the block's data ends before byte {} it needs", at + len)))
    }
    pub fn u8(&self, at: usize) -> Result<u8, LogError> {
        Ok(self.bytes(at, 1)?[0])
    }
    pub fn u16(&self, at: usize) -> Result<u16, LogError> {
        Ok(u16::from_le_bytes(self.bytes(at, 2)?.try_into().expect("2 bytes")))
    }
    pub fn u32(&self, at: usize) -> Result<u32, LogError> {
        Ok(u32::from_le_bytes(self.bytes(at, 4)?.try_into().expect("4 bytes")))
    }
    pub fn u64(&self, at: usize) -> Result<u64, LogError> {
        Ok(u64::from_le_bytes(self.bytes(at, 8)?.try_into().expect("8 bytes")))
    }
}

/// The text of a `TX` or `MD` block, up to its first NUL.
pub(super) fn text(file: &[u8], offset: u64) -> Result<String, LogError> {
    if offset == 0 {
        return Ok(String::new());
    }
    let block = read(file, offset, &[b"TX", b"MD"])?;
    let end = block.data.iter().position(|&b| b == 0).unwrap_or(block.data.len());
    Ok(String::from_utf8_lossy(&block.data[..end]).into_owned())
}
