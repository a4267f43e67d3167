//! Unit tests of the WAV reader over bytes built in memory: every encoding against known values
//! (G.711 against Python's audioop, all 256 codes), pipe-style and RF64 sizes, EXTENSIBLE,
//! chunk skipping, data that ends early, the header errors, and mutated headers (no panic).

use super::header::DataLength;
use super::*;
use std::io::Cursor;

const PCM: u16 = 1;
const FLOAT: u16 = 3;
const ALAW: u16 = 6;
const MULAW: u16 = 7;

/// A chunk: id, size, body and the pad byte after an odd-sized body.
fn chunk(id: &[u8; 4], body: &[u8]) -> Vec<u8> {
    chunk_sized(id, body.len() as u32, body)
}

/// A chunk whose size field says `size`, whatever the body holds.
fn chunk_sized(id: &[u8; 4], size: u32, body: &[u8]) -> Vec<u8> {
    let mut c = id.to_vec();
    c.extend(size.to_le_bytes());
    c.extend(body);
    if body.len() % 2 == 1 {
        c.push(0);
    }
    c
}

/// A plain 16-byte `fmt ` chunk.
fn fmt(tag: u16, channels: u16, rate: u32, bits: u16) -> Vec<u8> {
    let block = channels * bits / 8;
    let mut b = Vec::new();
    b.extend(tag.to_le_bytes());
    b.extend(channels.to_le_bytes());
    b.extend(rate.to_le_bytes());
    b.extend((rate * block as u32).to_le_bytes());
    b.extend(block.to_le_bytes());
    b.extend(bits.to_le_bytes());
    chunk(b"fmt ", &b)
}

/// A 40-byte WAVE_FORMAT_EXTENSIBLE `fmt ` chunk with subformat `sub_tag`.
fn fmt_extensible(sub_tag: u16, channels: u16, rate: u32, bits: u16, valid: u16) -> Vec<u8> {
    let mut f = fmt(0xFFFE, channels, rate, bits);
    f[4..8].copy_from_slice(&40u32.to_le_bytes());
    f.extend(22u16.to_le_bytes());
    f.extend(valid.to_le_bytes());
    f.extend(0u32.to_le_bytes());
    f.extend(sub_tag.to_le_bytes());
    f.extend([
        0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71,
    ]);
    f
}

/// A whole file: `RIFF`/`RF64`/`BW64`, a size field, `WAVE` and the chunks.
fn wav_file(container: &[u8; 4], size: u32, chunks: &[Vec<u8>]) -> Vec<u8> {
    let mut w = container.to_vec();
    w.extend(size.to_le_bytes());
    w.extend(b"WAVE");
    for c in chunks {
        w.extend(c);
    }
    w
}

/// A RIFF file with correct sizes.
fn riff(chunks: &[Vec<u8>]) -> Vec<u8> {
    let len: usize = chunks.iter().map(Vec::len).sum();
    wav_file(b"RIFF", 4 + len as u32, chunks)
}

fn open(bytes: Vec<u8>) -> Result<WavSource> {
    WavSource::new("t.wav", InputReader::from_read(Cursor::new(bytes)))
}

/// Every sample of the file, read in blocks of `block` frames.
fn read_blocks(source: &mut WavSource, block: usize) -> Result<Vec<f64>> {
    let mut out = Vec::new();
    while source.read(&mut out, block)? > 0 {}
    Ok(out)
}

fn read_all(bytes: Vec<u8>) -> Result<(WavSource, Vec<f64>)> {
    let mut source = open(bytes)?;
    let samples = read_blocks(&mut source, 1000)?;
    Ok((source, samples))
}

fn error_text(bytes: Vec<u8>) -> String {
    match read_all(bytes) {
        Ok((_, s)) => panic!("expected an error, read {} samples", s.len()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn integer_pcm_scales_by_full_scale() {
    let cases: [(u16, Vec<u8>, Vec<f64>); 4] = [
        (
            8,
            vec![0, 128, 255, 64],
            vec![-1.0, 0.0, 127.0 / 128.0, -0.5],
        ),
        (
            16,
            [-32768i16, 0, 16384, 32767]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
            vec![-1.0, 0.0, 0.5, 32767.0 / 32768.0],
        ),
        (
            24,
            vec![0, 0, 0x80, 1, 0, 0, 0, 0, 0x40, 0xFF, 0xFF, 0xFF],
            vec![-1.0, 1.0 / 8_388_608.0, 0.5, -1.0 / 8_388_608.0],
        ),
        (
            32,
            [i32::MIN, 1 << 30, -1, i32::MAX]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
            vec![
                -1.0,
                0.5,
                -1.0 / 2_147_483_648.0,
                i32::MAX as f64 / 2_147_483_648.0,
            ],
        ),
    ];
    for (bits, data, want) in cases {
        let (source, got) =
            read_all(riff(&[fmt(PCM, 1, 8000, bits), chunk(b"data", &data)])).expect("reads");
        assert_eq!(got, want, "{bits}-bit");
        assert_eq!(source.shortfall(), None);
        assert_eq!(source.info().rate, 8000.0);
    }
}

#[test]
fn float32_and_float64_are_taken_as_is() {
    let values = [0.1f64, -1.5, 1e-300, 3.25];
    let f64_bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let (_, got) = read_all(riff(&[
        fmt(FLOAT, 2, 44100, 64),
        chunk(b"data", &f64_bytes),
    ]))
    .expect("f64");
    assert_eq!(got, values, "64-bit float is exact");
    let f32_bytes: Vec<u8> = values
        .iter()
        .flat_map(|v| (*v as f32).to_le_bytes())
        .collect();
    let (_, got) = read_all(riff(&[
        fmt(FLOAT, 1, 44100, 32),
        chunk(b"data", &f32_bytes),
    ]))
    .expect("f32");
    let want: Vec<f64> = values.iter().map(|v| *v as f32 as f64).collect();
    assert_eq!(got, want);
}

#[test]
fn nan_or_infinity_is_an_error_naming_the_sample() {
    let mut data: Vec<u8> = (0..10).flat_map(|_| 0.5f64.to_le_bytes()).collect();
    data[7 * 8..8 * 8].copy_from_slice(&f64::NAN.to_le_bytes());
    let err = error_text(riff(&[fmt(FLOAT, 1, 8000, 64), chunk(b"data", &data)]));
    assert!(err.contains("sample 7 is NaN"), "{err}");
    // in a later block, the index counts from the start of the data
    let mut data: Vec<u8> = (0..10).flat_map(|_| 0.5f32.to_le_bytes()).collect();
    data[9 * 4..].copy_from_slice(&f32::INFINITY.to_le_bytes());
    let mut source = open(riff(&[fmt(FLOAT, 1, 8000, 32), chunk(b"data", &data)])).expect("open");
    let err = read_blocks(&mut source, 3).expect_err("inf");
    assert!(err.to_string().contains("sample 9 is inf"), "{err}");
}

include!("g711_reference.rs");

#[test]
fn g711_decodes_all_256_codes_as_audioop_does() {
    let codes: Vec<u8> = (0..=255).collect();
    for (tag, reference) in [(ALAW, &AUDIOOP_ALAW2LIN), (MULAW, &AUDIOOP_ULAW2LIN)] {
        let (_, got) =
            read_all(riff(&[fmt(tag, 1, 8000, 8), chunk(b"data", &codes)])).expect("g711");
        let want: Vec<f64> = reference.iter().map(|&v| v as f64 / 32768.0).collect();
        assert_eq!(got, want, "format tag {tag}");
    }
    // spot checks written out: A-law 0xD5 is +8, mu-law 0x80 is +32124, 0xFF is 0
    assert_eq!(AUDIOOP_ALAW2LIN[0xD5], 8);
    assert_eq!(AUDIOOP_ULAW2LIN[0x80], 32124);
    assert_eq!(AUDIOOP_ULAW2LIN[0xFF], 0);
}

#[test]
fn pipe_sizes_read_to_the_end_of_the_input() {
    let samples: Vec<u8> = (0..1001i16).flat_map(|v| v.to_le_bytes()).collect();
    // arecord/ffmpeg: 0xFFFFFFFF; others: 0; sox: its 0x7ffff000 placeholder
    for (riff_size, data_size) in [(u32::MAX, u32::MAX), (0, 0), (0x7fff_f024, 0x7fff_f000)] {
        let mut bytes = wav_file(
            b"RIFF",
            riff_size,
            &[fmt(PCM, 1, 48000, 16), chunk_sized(b"data", data_size, &[])],
        );
        bytes.extend(&samples);
        let (source, got) = read_all(bytes).expect("reads");
        assert_eq!(got.len(), 1001, "data size {data_size:#x}");
        assert_eq!(got[1000], 1000.0 / 32768.0);
        assert_eq!(source.shortfall(), None, "no warning for a clean end");
    }
    // sox's placeholder is rounded down to whole frames: 0x7fffefff for 9-byte frames
    let layout = header::read_layout(
        "t.wav",
        &mut Cursor::new(wav_file(
            b"RIFF",
            0,
            &[
                fmt_extensible(PCM, 3, 8000, 24, 24),
                chunk_sized(b"data", 0x7fff_efff, &[]),
            ],
        )),
    )
    .expect("header");
    assert_eq!(layout.data, DataLength::ToEof);
}

#[test]
fn a_declared_size_stops_before_a_trailing_chunk() {
    let data: Vec<u8> = [1i16, 2, 3].iter().flat_map(|v| v.to_le_bytes()).collect();
    let bytes = riff(&[
        fmt(PCM, 1, 8000, 16),
        chunk(b"data", &data),
        chunk(b"LIST", b"INFOISFT"),
    ]);
    let (_, got) = read_all(bytes).expect("reads");
    assert_eq!(got, [1.0, 2.0, 3.0].map(|v| v / 32768.0));
}

/// A second `fmt ` or `data` chunk is an error naming it, from a stream and from a regular file
/// (checked when it is opened), whatever chunks lie between; other trailing chunks are not.
#[test]
fn a_second_fmt_or_data_chunk_is_an_error() {
    let data: Vec<u8> = [1i16, 2, 3].iter().flat_map(|v| v.to_le_bytes()).collect();
    let two_fmt = riff(&[
        fmt(PCM, 1, 8000, 16),
        fmt(PCM, 1, 16000, 16),
        chunk(b"data", &data),
    ]);
    assert!(error_text(two_fmt).contains("a second fmt chunk"));
    let list = chunk(b"LIST", b"INFOISFT!");
    let two_data = riff(&[
        fmt(PCM, 1, 8000, 16),
        chunk(b"data", &data),
        list.clone(),
        chunk(b"data", &data),
    ]);
    let second_at = 12 + 24 + 14 + list.len();
    let said = format!("a second 'data' chunk at byte {second_at}, after the data");
    assert!(error_text(two_data.clone()).contains(&said), "stream");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("two.wav");
    std::fs::write(&path, &two_data).expect("write");
    let file = std::fs::File::open(&path).expect("open");
    let err = WavSource::new("two.wav", InputReader::file(file))
        .err()
        .expect("an error");
    assert!(err.to_string().contains(&said), "file: {err}");
    let one = riff(&[
        fmt(PCM, 1, 8000, 16),
        chunk(b"data", &data),
        list,
        chunk(b"id3 ", b"x"),
    ]);
    assert_eq!(read_all(one).expect("reads").1.len(), 3);
}

/// An RF64 header: ds64 (RIFF size, data size, sample count, empty table), then `chunks`.
fn rf64(container: &[u8; 4], data_size: u64, chunks: &[Vec<u8>]) -> Vec<u8> {
    let mut ds64 = Vec::new();
    ds64.extend(u64::MAX.to_le_bytes());
    ds64.extend(data_size.to_le_bytes());
    ds64.extend(0u64.to_le_bytes());
    ds64.extend(0u32.to_le_bytes());
    let mut all = vec![chunk(b"ds64", &ds64)];
    all.extend_from_slice(chunks);
    wav_file(container, u32::MAX, &all)
}

#[test]
fn rf64_and_bw64_take_the_data_size_from_ds64() {
    let data: Vec<u8> = [0.25f32, -0.5, 0.75]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    for container in [b"RF64", b"BW64"] {
        // the trailing LIST chunk must not be read as samples: only ds64 says where data ends
        let bytes = rf64(
            container,
            8,
            &[
                fmt(FLOAT, 1, 96000, 32),
                chunk_sized(b"data", u32::MAX, &data),
                chunk(b"LIST", b"INFO"),
            ],
        );
        let (source, got) = read_all(bytes).expect("rf64");
        assert_eq!(got, [0.25, -0.5], "{}", container.escape_ascii());
        assert_eq!(source.info().rate, 96000.0);
    }
    // written to a pipe: sizes of 0 in ds64, -1 in data: read to EOF
    let bytes = rf64(
        b"RF64",
        0,
        &[
            fmt(FLOAT, 1, 96000, 32),
            chunk_sized(b"data", u32::MAX, &data),
        ],
    );
    let (_, got) = read_all(bytes).expect("rf64 pipe");
    assert_eq!(got, [0.25, -0.5, 0.75]);
}

#[test]
fn pcm_of_bits_between_whole_bytes_reads_as_its_container() {
    // tag 1 with 12 or 20 bits: left-justified in 2 or 3 bytes (helper-53: refused, where
    // libsndfile, scipy and ffmpeg read them)
    for (bits, block, data, want) in [
        (
            12u16,
            2u16,
            (0x7FF0i16 >> 4 << 4).to_le_bytes().to_vec(),
            0x7FF0 as f64 / 32768.0,
        ),
        (20, 3, vec![0x00, 0x00, 0xC0], -0.5),
    ] {
        let mut f = fmt(PCM, 1, 8000, bits);
        f[8 + 12..8 + 14].copy_from_slice(&block.to_le_bytes());
        let (source, got) = read_all(riff(&[f, chunk(b"data", &data)])).expect("read");
        assert_eq!(got, [want], "{bits} bits");
        assert_eq!(source.format().encoding.bytes(), block as usize);
    }
    // a block that is not the whole bytes' is still refused
    let mut f = fmt(PCM, 1, 8000, 12);
    f[8 + 12..8 + 14].copy_from_slice(&4u16.to_le_bytes());
    let said = error_text(riff(&[f, chunk(b"data", &[0; 4])]));
    assert!(said.contains("with 12 bits per sample"), "{said}");
}

#[test]
fn extensible_reads_its_subformat() {
    // 24-bit, 3 channels, as sox writes it
    let data = vec![0, 0, 0x40, 0, 0, 0xC0, 1, 0, 0];
    let (source, got) = read_all(riff(&[
        fmt_extensible(PCM, 3, 8000, 24, 24),
        chunk(b"fact", &1u32.to_le_bytes()),
        chunk(b"data", &data),
    ]))
    .expect("24-bit extensible");
    assert_eq!(got, [0.5, -0.5, 1.0 / 8_388_608.0]);
    assert_eq!(source.info().channels, 3);
    // 20 valid bits in a 32-bit container: the container decides the scale
    let data = (1i32 << 30).to_le_bytes().to_vec();
    let (_, got) = read_all(riff(&[
        fmt_extensible(PCM, 1, 8000, 32, 20),
        chunk(b"data", &data),
    ]))
    .expect("32-bit container");
    assert_eq!(got, [0.5]);
    for (sub, bits, data, want) in [
        (FLOAT, 64, (-0.125f64).to_le_bytes().to_vec(), -0.125),
        (FLOAT, 32, 0.5f32.to_le_bytes().to_vec(), 0.5),
        (MULAW, 8, vec![0x80], 32124.0 / 32768.0),
        (ALAW, 8, vec![0xD5], 8.0 / 32768.0),
    ] {
        let (source, got) = read_all(riff(&[
            fmt_extensible(sub, 1, 8000, bits, bits),
            chunk(b"data", &data),
        ]))
        .expect("extensible");
        assert_eq!(got, [want], "subformat {sub}");
        assert_eq!(source.format().encoding.bytes(), bits as usize / 8);
    }
    // a subformat GUID that is not a format tag
    let mut other = fmt_extensible(PCM, 1, 8000, 16, 16);
    let guid_at = other.len() - 16;
    other[guid_at + 5] = 0x77;
    let err = error_text(riff(&[other, chunk(b"data", &[0, 0])]));
    assert!(
        err.contains("unsupported WAV encoding") && err.contains("GUID 00000001-7700-"),
        "{err}"
    );
}

#[test]
fn odd_sized_chunks_are_skipped_with_their_pad_byte() {
    let data: Vec<u8> = [100i16, -100]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let (_, got) = read_all(riff(&[
        chunk(b"JUNK", &[1, 2, 3]),
        fmt(PCM, 2, 8000, 16),
        chunk(b"bext", &[9; 5]),
        chunk(b"LIST", b"INFOI"),
        chunk(b"data", &data),
    ]))
    .expect("reads");
    assert_eq!(got, [100.0 / 32768.0, -100.0 / 32768.0]);
    // an odd-sized fmt chunk (18 bytes with cbSize, plus one stray byte) is padded too
    let mut fmt19 = fmt(PCM, 1, 8000, 8);
    fmt19[4..8].copy_from_slice(&19u32.to_le_bytes());
    fmt19.extend([0, 0, 0xAB, 0]);
    let (_, got) = read_all(riff(&[fmt19, chunk(b"data", &[192])])).expect("fmt 19");
    assert_eq!(got, [0.5]);
}

#[test]
fn data_that_ends_early_gives_the_samples_present_and_the_missing_count() {
    // the header promises 10 samples; 7 and a half are there
    let data: Vec<u8> = (0..10i16).flat_map(|v| v.to_le_bytes()).collect();
    let bytes = riff(&[fmt(PCM, 1, 8000, 16), chunk(b"data", &data)]);
    let cut = bytes[..bytes.len() - 5].to_vec();
    let (source, got) = read_all(cut).expect("reads what is there");
    assert_eq!(got, (0..7).map(|v| v as f64 / 32768.0).collect::<Vec<_>>());
    let s = source.shortfall().expect("a shortfall");
    assert_eq!((s.expected, s.present, s.missing()), (10, 7, 3));
    assert_eq!(
        source.describe(s),
        "t.wav: WAV data ends early: 3 of 10 samples missing; analysed the 7 present"
    );
    // read to EOF: a trailing partial frame (stereo, 1.5 frames) is dropped and counted
    let mut pipe = wav_file(
        b"RIFF",
        u32::MAX,
        &[fmt(PCM, 2, 8000, 16), chunk_sized(b"data", u32::MAX, &[])],
    );
    pipe.extend([0, 0x40, 0, 0xC0, 0, 0x40]);
    let (source, got) = read_all(pipe).expect("reads");
    assert_eq!(got, [0.5, -0.5]);
    let s = source.shortfall().expect("a shortfall");
    assert_eq!((s.expected, s.present), (2, 1));
    assert!(source.describe(s).contains("1 of 2 sample frames missing"));
    // a data size that is not a whole number of frames: the last partial frame counts
    let (source, got) = read_all(riff(&[
        fmt(PCM, 1, 8000, 16),
        chunk(b"data", &[0, 0x40, 1]),
    ]))
    .expect("reads");
    assert_eq!(got, [0.5]);
    assert_eq!(source.shortfall().map(|s| s.missing()), Some(1));
}

#[test]
fn not_wav_and_cut_headers_say_what_is_wrong() {
    assert!(error_text(b"fLaC\0\0\0\x22 etc".to_vec()).contains("no RIFF/WAVE header"));
    assert!(error_text(Vec::new()).contains("no RIFF/WAVE header: the file is empty"));
    assert!(error_text(b"RIFF\x10\0\0\0AVI LIST".to_vec()).contains("no RIFF/WAVE header"));
    let data: Vec<u8> = (0..10i16).flat_map(|v| v.to_le_bytes()).collect();
    let whole = riff(&[
        chunk(b"LIST", b"INFO"),
        fmt(PCM, 1, 8000, 16),
        chunk(b"data", &data),
    ]);
    let header_len = whole.len() - data.len();
    for cut in 4..header_len {
        let err = error_text(whole[..cut].to_vec());
        assert!(
            err.starts_with("t.wav: truncated WAV file: it ends inside the header"),
            "cut at {cut}: {err}"
        );
    }
    assert!(error_text(whole[..22].to_vec()).contains("in the 'LIST' chunk"));
    assert!(error_text(whole[..36].to_vec()).contains("in the 'fmt ' chunk"));
    assert!(error_text(whole[..header_len].to_vec()).contains("WAV file contains no samples"));
}

#[test]
fn unsupported_and_impossible_formats_are_named() {
    let err = error_text(riff(&[fmt(2, 1, 8000, 4), chunk(b"data", &[0; 4])]));
    assert!(
        err.contains("format tag 0x0002 (Microsoft ADPCM) with 4 bits")
            && err.contains("fftd reads integer PCM"),
        "{err}"
    );
    let err = error_text(riff(&[fmt(PCM, 1, 8000, 12), chunk(b"data", &[0; 4])]));
    assert!(err.contains("integer PCM) with 12 bits"), "{err}");
    let err = error_text(riff(&[fmt(PCM, 0, 8000, 16), chunk(b"data", &[0; 4])]));
    assert!(err.contains("zero channels or zero sample rate"), "{err}");
    let err = error_text(riff(&[fmt(PCM, 1, 0, 16), chunk(b"data", &[0; 4])]));
    assert!(err.contains("zero channels or zero sample rate"), "{err}");
    let err = error_text(riff(&[chunk(b"data", &[0; 4]), fmt(PCM, 1, 8000, 16)]));
    assert!(err.contains("data chunk comes before fmt"), "{err}");
    let err = error_text(riff(&[
        chunk(b"fmt ", &[1, 0, 1, 0]),
        chunk(b"data", &[0; 4]),
    ]));
    assert!(err.contains("fmt chunk is 4 bytes, less than 16"), "{err}");
}

#[test]
fn blocks_of_any_size_give_the_same_samples() {
    let data: Vec<u8> = (0..999i16).flat_map(|v| (v * 31).to_le_bytes()).collect();
    let bytes = riff(&[fmt(PCM, 3, 8000, 16), chunk(b"data", &data)]);
    let (_, whole) = read_all(bytes.clone()).expect("reads");
    for block in [1, 7, 333, 100_000] {
        let mut source = open(bytes.clone()).expect("open");
        assert_eq!(read_blocks(&mut source, block).expect("reads"), whole);
    }
}

#[test]
fn mutated_headers_never_panic() {
    let data: Vec<u8> = (0..64u8).collect();
    let seeds = [
        riff(&[fmt(PCM, 2, 8000, 16), chunk(b"data", &data)]),
        riff(&[
            fmt_extensible(FLOAT, 1, 8000, 64, 64),
            chunk(b"data", &data),
        ]),
        rf64(b"RF64", 64, &[fmt(ALAW, 1, 8000, 8), chunk(b"data", &data)]),
    ];
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for round in 0..3000 {
        let mut bytes = seeds[round % seeds.len()].clone();
        for _ in 0..1 + next() % 4 {
            let at = (next() % 100) as usize % bytes.len();
            bytes[at] = match next() % 4 {
                0 => 0xFF,
                1 => 0,
                _ => next() as u8,
            };
        }
        bytes.truncate(bytes.len() - (next() % 8) as usize);
        // errors are fine; a panic or a runaway read is not
        if let Ok(mut source) = open(bytes) {
            let _ = read_blocks(&mut source, 17);
        }
    }
}
