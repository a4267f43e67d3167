//! The two-level (four-step) path of `kernels/twolevel.cl` for frames that are not powers of two
//! and do not fit local memory, and for Bluestein's power-of-two length: N = N1 × N2 points as
//! column FFTs (N1 points, window on load, the W_N twiddle on store) then row FFTs (N2 points,
//! the finished bins on store), each sub-FFT in local memory with the mixed-radix passes, so a
//! frame crosses device memory twice instead of once per pass (`mixed`'s global passes, which
//! stay the fallback for lengths that do not split into two local-memory transforms).
//!
//! Plain sizes: columns (input → work a) and rows (work a → bins; even real n: the r2c
//! post-processing fused, rows in pairs). Bluestein (m points over L): columns with the chirp on
//! load (input → a), rows times the filter's spectrum (a → b), columns (b → a), rows times the
//! chirp (a → bins; even real n: → b, then `post`) — four kernels, with the chirp, the filter and
//! the twiddles computed once per plan on the host in f64. Odd real n through Bluestein: two
//! frames per transform (`two_frames`, the real and imaginary parts of one complex frame), the last
//! rows kernel → b, then `two_frames_post` splits the two spectra (on an H100 real 65521 took 2.95 ms
//! per 2^26 samples against 5.12 one frame per transform; issue 40).

use super::launch::{enqueue_post, Enqueue, Items, Launch};
use super::mixed::{chirp, filter_spectrum, interleave, radices};
use super::plan::twiddles;
use super::*;
use opencl3::event::Event;
use opencl3::kernel::ExecuteKernel;

const SRC_MIXED: &str = include_str!("../../../kernels/mixed_radix.cl");
pub(super) const SRC_LPASS: &str = include_str!("../../../kernels/mixed_lpass.cl");
const SRC_TWOLEVEL: &str = include_str!("../../../kernels/twolevel.cl");

/// Most transforms per work-group of one stage.
const FPB_MAX: usize = 16;
/// Most work-items per group.
const WG_MAX: usize = 256;

/// One stage's shape: `fpb` transforms of `len` points per work-group of `wg` work-items.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stage {
    pub len: usize,
    pub fpb: usize,
    pub wg: usize,
}

impl Stage {
    /// Local stride of one transform: `len` rounded up to odd (bank spread of the transposes).
    pub(crate) fn stride(len: usize) -> usize {
        len | 1
    }

    /// Local memory of `fpb` transforms of `len` points: two arrays of complex values, each
    /// index padded by one every 16 (twolevel.cl, LP_PAD).
    pub(crate) fn local_bytes(len: usize, fpb: usize, real_bytes: usize) -> usize {
        let points = fpb * Self::stride(len);
        2 * (points + (points >> 4) + 1) * 2 * real_bytes
    }

    fn new(len: usize, real_bytes: usize, local_limit: usize, max_wg: usize) -> Option<Self> {
        let mut fpb = FPB_MAX;
        while fpb > 2 && Self::local_bytes(len, fpb, real_bytes) > local_limit {
            fpb /= 2;
        }
        if Self::local_bytes(len, fpb, real_bytes) > local_limit {
            return None;
        }
        let wg = (fpb * len / 4)
            .next_multiple_of(32)
            .clamp(32, WG_MAX)
            .min(max_wg.max(1));
        Some(Stage { len, fpb, wg })
    }
}

/// The split of `n` points (factors 2, 3, 5, 7 only) into N1 × N2, N1 <= N2 as close to √n as
/// the local-memory limit allows, each stage with at least 2 transforms per group; None when no
/// split fits (or n has another prime factor).
pub fn twolevel_geometry(
    n: usize,
    real_bytes: usize,
    local_limit: usize,
    max_wg: usize,
) -> Option<(Stage, Stage)> {
    radices(n)?;
    if n < 4 {
        return None;
    }
    let mut best = None;
    let mut n1 = 2;
    while n1 * n1 <= n {
        if n % n1 == 0 {
            let s1 = Stage::new(n1, real_bytes, local_limit, max_wg);
            let s2 = Stage::new(n / n1, real_bytes, local_limit, max_wg);
            if let (Some(a), Some(b)) = (s1, s2) {
                best = Some((a, b));
            }
        }
        n1 += 1;
    }
    best
}

/// Bluestein's tables and second pair of kernels.
struct Chirped<T: Sample> {
    chirp: Buffer<T>,
    filter: Buffer<T>,
    columns2: Kernel,
    rows2: Kernel,
    /// r2c post-processing (even real n), or `two_frames_post` (odd real n, two frames per transform).
    post: Option<Kernel>,
    /// Odd real n: two frames per transform.
    two_frames: bool,
}

/// A two-level plan for m complex points per frame (Bluestein: over `n` = L points).
pub(super) struct TwoLevel<T: Sample> {
    n: usize,
    /// Even real n, no Bluestein: the first rows kernel holds rows in pairs.
    row_pairs: bool,
    s1: Stage,
    s2: Stage,
    columns: Kernel,
    rows: Kernel,
    tw1: Buffer<T>,
    tw2: Buffer<T>,
    twn: Buffer<T>,
    bluestein: Option<Chirped<T>>,
}

/// Stage-1 loads and stage-2 stores of one program (twolevel.cl's LOAD, CHIRP_IN, STORE).
#[derive(Clone, Copy)]
struct Ends {
    load_input: bool,
    chirp_in: bool,
    store: u32,
}

impl<T: Sample> OpenClEngine<T> {
    /// The two-level path for `m` points over `n` (m, or Bluestein's length) in the stages
    /// `choice::choose` gave; `real_packed`: even real n (m = n/2); `real_full`: odd real n (m =
    /// n, one real per point).
    pub(super) fn twolevel(
        &self,
        m: usize,
        (n, (s1, s2)): (usize, (Stage, Stage)),
        (real_packed, real_full): (bool, bool),
        opts: &str,
    ) -> Result<TwoLevel<T>, String> {
        let plain = n == m;
        // odd real n through Bluestein: two frames per transform
        let two_frames = !plain && real_full;
        let geo = format!(
            "{opts} -D N={n} -D N1={} -D N2={} -D TWO_FRAMES={}",
            s1.len, s2.len, two_frames as u32
        );
        let build = |stage: u32, s: &Stage, e: Ends, name: &str| {
            self.twolevel_kernel(&geo, (stage, s), e, name)
        };
        let first = Ends {
            load_input: true,
            chirp_in: !plain,
            store: match (plain, real_packed) {
                (false, _) => 2,
                (true, true) => 1,
                (true, false) => 0,
            },
        };
        let columns = build(1, &s1, first, "tl_columns")?;
        let rows = build(2, &s2, first, "tl_rows")?;
        let bluestein = if plain {
            None
        } else {
            let second = Ends {
                load_input: false,
                chirp_in: false,
                store: 3,
            };
            let c = chirp(m);
            let post = self.bluestein_post(two_frames, real_packed, (&geo, opts))?;
            Some(Chirped {
                chirp: self.upload(&interleave::<T>(&c))?,
                filter: self.upload(&interleave::<T>(&filter_spectrum(&c, n)))?,
                columns2: build(1, &s1, second, "tl_columns")?,
                rows2: build(2, &s2, second, "tl_rows")?,
                post,
                two_frames,
            })
        };
        Ok(TwoLevel {
            n,
            row_pairs: plain && real_packed,
            s1,
            s2,
            columns,
            rows,
            tw1: self.upload(&twiddles(s1.len))?,
            tw2: self.upload(&twiddles(s2.len))?,
            twn: self.upload(&twiddles(n))?,
            bluestein,
        })
    }
}

impl<T: Sample> OpenClEngine<T> {
    /// What follows Bluestein's transforms: `two_frames_post` splitting two real frames' spectra
    /// (`two_frames`), the r2c post-processing (even real n), or nothing (complex n).
    fn bluestein_post(
        &self,
        two_frames: bool,
        real_packed: bool,
        (geo, opts): (&str, &str),
    ) -> Result<Option<Kernel>, String> {
        if two_frames {
            let options = format!("{geo} -D STAGE=3");
            let pg = self
                .dev
                .program("twolevel", &[SRC_COMMON, SRC_TWOLEVEL], &options)?;
            let kernel = Kernel::create(&pg, "two_frames_post");
            return Ok(Some(
                kernel.map_err(|e| format!("kernel two_frames_post: {e}"))?,
            ));
        }
        if real_packed {
            let src = [SRC_COMMON, SRC_GLOBAL, SRC_POST];
            let pg = self.dev.program("stockham_global", &src, opts)?;
            let kernel = Kernel::create(&pg, "post");
            return Ok(Some(kernel.map_err(|e| format!("kernel post: {e}"))?));
        }
        Ok(None)
    }

    /// One stage's kernel (`name`, STAGE `stage` of shape `s`) with the loads and stores `e`;
    /// `geo`: the plan's defines and N, N1, N2.
    fn twolevel_kernel(
        &self,
        geo: &str,
        (stage, s): (u32, &Stage),
        e: Ends,
        name: &str,
    ) -> Result<Kernel, String> {
        let list: Vec<String> = radices(s.len)
            .ok_or("two-level length")?
            .iter()
            .map(|r| r.to_string())
            .collect();
        let o = format!(
            "{geo} -D STAGE={stage} -D FPB={} -D WG={} -D NPASSES={} -D RADICES={{{}}} \
             -D LP_LEN={} -D LP_COUNT={} -D LP_STRIDE={} -D LP_PAD -D LOAD={} -D CHIRP_IN={} -D STORE={}",
            s.fpb,
            s.wg,
            list.len(),
            list.join(","),
            s.len,
            s.fpb,
            Stage::stride(s.len),
            e.load_input as u32,
            e.chirp_in as u32,
            e.store
        );
        let src = [SRC_COMMON, SRC_MIXED, SRC_LPASS, SRC_TWOLEVEL];
        let program = self.dev.program("twolevel", &src, &o)?;
        Kernel::create(&program, name).map_err(|e| format!("kernel {name}: {e}"))
    }
}

impl<T: Sample> TwoLevel<T> {
    /// Whether this plan goes through Bluestein's chirp-z transform.
    pub(super) fn is_bluestein(&self) -> bool {
        self.bluestein.is_some()
    }

    /// Whether two odd real frames go through one transform (`two_frames`).
    pub(super) fn has_two_frames_per_transform(&self) -> bool {
        self.bluestein.as_ref().is_some_and(|b| b.two_frames)
    }

    /// Complex points per frame each work buffer must hold.
    pub(super) fn work_points(&self) -> usize {
        self.n
    }

    /// Stage 1's groups per frame: one per `fpb` of the N2 columns.
    fn column_groups(&self) -> usize {
        self.s2.len.div_ceil(self.s1.fpb)
    }

    /// Stage 2's groups per frame: one per `fpb` of the N1 rows, or per fpb/2 of the ⌈N1/2⌉
    /// row pairs (`row_pairs`: even real n's fused post-processing).
    fn row_groups(&self, row_pairs: bool) -> usize {
        let n1 = self.s1.len;
        if row_pairs {
            n1.div_ceil(2).div_ceil(self.s2.fpb / 2)
        } else {
            n1.div_ceil(self.s2.fpb)
        }
    }

    /// Enqueues one chunk: input frames to finished bins, through every kernel.
    pub(super) fn enqueue(
        &mut self,
        window: &Buffer<T>,
        l: &Launch<'_, T>,
        events: &mut Vec<Event>,
    ) -> Result<(), String> {
        let [a, b] = l.work()?;
        // transforms of this launch: one per frame, or per pair of frames
        let n = if self.has_two_frames_per_transform() {
            l.frames.div_ceil(2)
        } else {
            l.frames
        };
        let (g1, g2) = (
            self.column_groups() * n,
            self.row_groups(self.row_pairs) * n,
        );
        let input = (l.inb, l.step, l.wait);
        let Some(bs) = &mut self.bluestein else {
            let tables = (&self.tw1, &self.twn, window, window);
            events.push(columns(
                &mut self.columns,
                (self.s1, g1),
                tables,
                input,
                a,
                l,
            )?);
            let tables = (&self.tw2, &self.tw2, a);
            events.push(rows(&mut self.rows, (self.s2, g2), tables, b, l)?);
            return Ok(());
        };
        let step2 = u32::try_from(2 * self.n).map_err(|_| "transform too long")?;
        let tables = (&self.tw1, &self.twn, window, &bs.chirp);
        events.push(columns(
            &mut self.columns,
            (self.s1, g1),
            tables,
            input,
            a,
            l,
        )?);
        let tables = (&self.tw2, &bs.filter, a);
        events.push(rows(&mut self.rows, (self.s2, g2), tables, b, l)?);
        let tables = (&self.tw1, &self.twn, window, &bs.chirp);
        let from_b = (b, step2, &[][..]);
        events.push(columns(
            &mut bs.columns2,
            (self.s1, g1),
            tables,
            from_b,
            a,
            l,
        )?);
        let tables = (&self.tw2, &bs.chirp, a);
        events.push(rows(&mut bs.rows2, (self.s2, g2), tables, b, l)?);
        if let Some(post) = &mut bs.post {
            events.push(enqueue_post(post, l, b)?);
        }
        Ok(())
    }
}

/// The work-group shape and the groups of one stage's launch (all its transforms).
type Shape = (Stage, usize);

/// Stage 1 (`tl_columns`): `frames` frames from `input` (buffer, step between frames, wait
/// list) into `tmp`; tables: the stage's twiddles, the N-point twiddles, the window, the chirp.
fn columns<T: Sample>(
    k: &mut Kernel,
    (s, groups): Shape,
    (tw, twn, window, chirp): (&Buffer<T>, &Buffer<T>, &Buffer<T>, &Buffer<T>),
    (inb, step, wait): (&Buffer<T>, u32, &[opencl3::types::cl_event]),
    tmp: &Buffer<T>,
    l: &Launch<'_, T>,
) -> Result<Event, String> {
    let frames = l.frames_u32()?;
    // SAFETY: arguments in the order of twolevel.cl's `tl_columns`: the input frames (frame f
    // read at f × step, inside the buffer), the window, the chirp (read only with CHIRP_IN,
    // m points), the stage's twiddles, the N-point twiddles and `tmp` (N points per frame: the
    // work buffers hold `work_points`); `groups` groups of `wg` work-items (the kernel's required
    // size), a transform index past the launch's transforms returns early.
    unsafe {
        ExecuteKernel::new(k)
            .set_event_wait_list(wait)
            .set_arg(inb)
            .set_arg(window)
            .set_arg(chirp)
            .set_arg(tw)
            .set_arg(twn)
            .set_arg(tmp)
            .set_arg(&frames)
            .set_arg(&step)
            .launch(Items::groups(groups, s.wg), l.q, "tl_columns")
    }
}

/// Stage 2 (`tl_rows`): rows of `tmp` → `dst` (Bluestein's middle step, even real n's last
/// step) or the launch's output bins; tables: the stage's twiddles, `aux` (filter or chirp).
fn rows<T: Sample>(
    k: &mut Kernel,
    (s, groups): Shape,
    (tw, aux, tmp): (&Buffer<T>, &Buffer<T>, &Buffer<T>),
    dst: &Buffer<T>,
    l: &Launch<'_, T>,
) -> Result<Event, String> {
    let frames = l.frames_u32()?;
    // SAFETY: arguments in the order of twolevel.cl's `tl_rows`: `tmp` (N points per frame),
    // the stage's twiddles, `aux` (N or m points; read only by the Bluestein stores), `dst` (a
    // work buffer, N points per frame), the output and the scale; `groups` groups of `wg`
    // work-items, a transform index past the launch's transforms returns early.
    unsafe {
        ExecuteKernel::new(k)
            .set_arg(tmp)
            .set_arg(tw)
            .set_arg(aux)
            .set_arg(dst)
            .set_arg(l.outb)
            .set_arg(&frames)
            .set_scale(&l.args)
            .launch(Items::groups(groups, s.wg), l.q, "tl_rows")
    }
}
