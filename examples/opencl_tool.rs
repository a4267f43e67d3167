//! Stand-alone driver for the OpenCL pieces while the `fftd` CLI is wired elsewhere:
//! `opencl_tool devices`, `opencl_tool bench [BenchArgs]`, `opencl_tool check --n N [--complex]`.
//! Logs go to stderr (RUST_LOG=fftd=debug for routing decisions).

use clap::{Parser, Subcommand};
use fftd::app::bench_args::BenchArgs;
use fftd::bench::run_bench;
use fftd::fft::compare::{compare_engines, default_tolerance};
use fftd::fft::router::DeviceChoice;
use fftd::fft::{Scale, TransformSpec};
use fftd::types::InputKind;
use fftd::window::WindowKind;

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    Devices,
    Bench(BenchArgs),
    Check {
        #[arg(long, default_value_t = 4096)]
        n: usize,
        #[arg(long, default_value_t = 64)]
        frames: usize,
        #[arg(long)]
        complex: bool,
        #[arg(long)]
        f64: bool,
    },
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Devices => {
            print!("{}", fftd::fft::opencl::device::describe_devices());
            Ok(())
        }
        Cmd::Bench(a) => run_bench(&a.spec()),
        Cmd::Check {
            n,
            frames,
            complex,
            f64,
        } => {
            let mut worst = 0usize;
            for window in WindowKind::ALL {
                for scale in Scale::ALL {
                    let spec = TransformSpec {
                        n,
                        kind: if complex {
                            InputKind::Complex
                        } else {
                            InputKind::Real
                        },
                        window,
                        scale,
                        rate: 48000.0,
                    };
                    let len = frames * spec.values_per_frame();
                    let sig =
                        |i: usize| ((i as f64) * 0.1).sin() + ((i * 7919) % 1000) as f64 / 2000.0;
                    let rep = if f64 {
                        let x: Vec<f64> = (0..len).map(sig).collect();
                        compare_engines(
                            &DeviceChoice::Gpu,
                            &spec,
                            &x,
                            frames,
                            default_tolerance::<f64>(),
                        )
                    } else {
                        let x: Vec<f32> = (0..len).map(|i| sig(i) as f32).collect();
                        compare_engines(
                            &DeviceChoice::Gpu,
                            &spec,
                            &x,
                            frames,
                            default_tolerance::<f32>(),
                        )
                    };
                    match rep {
                        Ok(r) => {
                            println!(
                                "n={n} {} {window} {scale}: {} values, {} over tol {:e}, max_rel {:.2e} ({})",
                                if complex { "complex" } else { "real" },
                                r.values, r.mismatches, r.tolerance, r.max_rel, r.engine
                            );
                            worst += r.mismatches;
                        }
                        Err(e) => {
                            eprintln!("error: {e}");
                            std::process::exit(1);
                        }
                    }
                }
            }
            if worst > 0 {
                std::process::exit(1);
            }
            Ok(())
        }
    };
    if let Err(e) = r {
        eprintln!("error: {e}");
        std::process::exit(e.exit_code());
    }
}
