//! `--average` in fleet workers (issue 28): the publisher cuts blocks on group boundaries
//! (`fftd publish --block-frames` a multiple of the group's frames), so each worker reduces the
//! whole groups of its block with the same `products::average::Averager` a local run uses, and
//! its rows are the local run's: row number (`frame`) = the group's index, `time_s` = the
//! interval's start, values reduced in the power domain, then scaled.
//!
//! A block that starts inside a group, or ends inside one and is not its stream's last block
//! (`fftd-end`), cannot give the local run's rows: it is refused with a usage error (the block
//! goes back to the queue) that says which `--block-frames` to publish with. Modes that carry
//! state from group to group (`peak`: the maximum since the stream's start; `exp`) are refused
//! by the worker's flags (`check_mode`).

use super::block::BlockHeader;
use crate::fft::Segments;
use crate::products::average::{AverageMode, AverageSpec, Averager, Grouping, Segment};
use crate::products::Finish;
use crate::types::Sample;

/// One averaged row of a block: its row number, time, frame count and where its values are.
pub(crate) struct AveragedRows<T> {
    /// (row number, time_s, frames) of each row.
    pub rows: Vec<(u64, f64, u32)>,
    /// The rows' values, back to back, scaled.
    pub values: Vec<T>,
}

/// The modes a worker can reduce block by block; the error names the mode.
pub(crate) fn check_mode(mode: AverageMode) -> Result<(), String> {
    match mode {
        AverageMode::Peak | AverageMode::Exp { .. } => Err(
            "--average-mode peak and exp carry each stream's state from group to group: fleet workers reduce whole groups one block at a time (mean, median, max, min); run fftd locally for them".into(),
        ),
        _ => Ok(()),
    }
}

/// Reduces `frames` power rows of `width` values (the block's frames in order) into its groups.
pub(crate) fn average_block<T: Sample>(
    (spec, mode, finish): (AverageSpec, AverageMode, Finish),
    header: &BlockHeader,
    power: &[T],
    width: usize,
) -> Result<AveragedRows<T>, String> {
    let shape = &header.shape;
    let grouping = spec.grouping(shape.rate, shape.hop)?;
    check_on_groups(&spec, &grouping, header)?;
    let hop = shape.hop as u64;
    let first = header.first_frame;
    let mut averager = Averager::<T>::new(grouping, mode, width);
    let mut out = AveragedRows {
        rows: Vec::new(),
        values: Vec::new(),
    };
    let mut emit = |row: crate::products::average::AveragedRow<T>| {
        let frames = u32::try_from(row.frames).unwrap_or(u32::MAX);
        out.rows.push((
            grouping.group_of(row.first_frame, row.first_start_sample),
            row.time_s,
            frames,
        ));
        finish.extend_finished(&row.values, &mut out.values);
    };
    match mode.segment_op() {
        None => {
            for (j, row) in power.chunks_exact(width).take(header.frames).enumerate() {
                let frame = first + j as u64;
                averager.push(frame, frame * hop, row, &mut emit);
            }
        }
        Some(op) => {
            let block = GroupsOf {
                grouping: &grouping,
                header,
                power,
                width,
            };
            block.push_segments(op, &mut averager, &mut emit);
        }
    }
    averager.finish(&mut emit);
    Ok(out)
}

/// A block that starts inside a group, or ends inside one and is not its stream's last, cannot
/// give a local run's rows: the error says which `--block-frames` to publish with.
fn check_on_groups(
    spec: &AverageSpec,
    grouping: &Grouping,
    header: &BlockHeader,
) -> Result<(), String> {
    let hop = header.shape.hop as u64;
    let group = |frame: u64| grouping.group_of(frame, frame * hop);
    let (first, end) = (
        header.first_frame,
        header.first_frame + header.frames as u64,
    );
    let per_row = grouping.frames_per_row();
    let refuse = |what: &str| {
        Err(format!(
            "{} {what} a group of --average {spec} ({}..={} frames): publish with --block-frames a multiple of the frames of a group",
            header.describe(),
            per_row.fewest,
            per_row.most
        ))
    };
    if first > 0 && group(first - 1) == group(first) {
        return refuse("starts inside");
    }
    if !header.last && group(end - 1) == group(end) {
        return refuse("ends inside");
    }
    Ok(())
}

/// A block's power rows and the groups they fall in.
struct GroupsOf<'a, T> {
    grouping: &'a Grouping,
    header: &'a BlockHeader,
    power: &'a [T],
    width: usize,
}

impl<T: Sample> GroupsOf<'_, T> {
    /// As a local run reduces a group's frames: the run of them in one segment (their mean, or
    /// held, in f64 and stored in the run's precision), then the segment into the averager.
    fn push_segments(
        &self,
        op: crate::fft::SegmentOp,
        averager: &mut Averager<T>,
        emit: &mut dyn FnMut(crate::products::average::AveragedRow<T>),
    ) {
        let (hop, width) = (self.header.shape.hop as u64, self.width);
        let group = |frame: u64| self.grouping.group_of(frame, frame * hop);
        let first = self.header.first_frame;
        let end = first + self.header.frames as u64;
        let mut reduced = vec![T::zero(); width];
        let mut at = first;
        while at < end {
            let mut to = at + 1;
            while to < end && group(to) == group(at) {
                to += 1;
            }
            let rows = &self.power[(at - first) as usize * width..(to - first) as usize * width];
            let lengths = [(to - at) as u32];
            Segments {
                lengths: &lengths,
                op,
            }
            .reduce(rows, width, &mut reduced);
            let segment = Segment {
                first_frame: at,
                first_start: at * hop,
                last_start: (to - 1) * hop,
                frames: (to - at) as usize,
            };
            averager.push_segment(segment, &reduced, emit);
            at = to;
        }
    }
}
