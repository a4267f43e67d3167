//! `--device`: what the user asked to compute on, as written (`auto`, `cpu`, `gpu`,
//! `opencl:P:D`, `gpu:all`, or a comma list of `cpu`, `gpu` and `opencl:P:D` entries). Parsing
//! only checks the syntax; `device_set::resolve` turns a choice into the devices of this machine.

use std::fmt;

/// `--device auto|cpu|gpu|gpu:all|opencl:P:D|LIST`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceChoice {
    Auto,
    Cpu,
    Gpu,
    OpenCl {
        platform: usize,
        device: usize,
    },
    /// `gpu:all`: every GPU-type OpenCL device.
    AllGpus,
    /// `a,b,...`: each entry (`cpu`, `gpu` or `opencl:P:D`) a device of its own; the same device
    /// named twice is opened twice (two independent engines).
    List(Vec<DeviceChoice>),
}

impl DeviceChoice {
    /// Whether the choice names an OpenCL device outright (`gpu`, `opencl:P:D`, `gpu:all`, or a
    /// list with one), rather than `cpu` or `auto`.
    pub(crate) fn names_a_device(&self) -> bool {
        match self {
            DeviceChoice::Auto | DeviceChoice::Cpu => false,
            DeviceChoice::Gpu | DeviceChoice::OpenCl { .. } | DeviceChoice::AllGpus => true,
            DeviceChoice::List(l) => l.iter().any(DeviceChoice::names_a_device),
        }
    }
}

impl fmt::Display for DeviceChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceChoice::Auto => f.write_str("auto"),
            DeviceChoice::Cpu => f.write_str("cpu"),
            DeviceChoice::Gpu => f.write_str("gpu"),
            DeviceChoice::OpenCl { platform, device } => write!(f, "opencl:{platform}:{device}"),
            DeviceChoice::AllGpus => f.write_str("gpu:all"),
            DeviceChoice::List(entries) => {
                let names: Vec<String> = entries.iter().map(ToString::to_string).collect();
                f.write_str(&names.join(","))
            }
        }
    }
}

impl DeviceChoice {
    /// Whether the choice can name more than one device (`gpu:all`, a list).
    #[cfg(test)]
    pub(crate) fn is_multi(&self) -> bool {
        matches!(self, DeviceChoice::AllGpus | DeviceChoice::List(_))
    }
}

/// One device without lists: `auto`, `cpu`, `gpu`, `gpu:all` or `opencl:P:D`.
pub(crate) fn parse_single(s: &str) -> Result<DeviceChoice, String> {
    match s {
        "auto" => Ok(DeviceChoice::Auto),
        "cpu" => Ok(DeviceChoice::Cpu),
        "gpu" => Ok(DeviceChoice::Gpu),
        "gpu:all" => Ok(DeviceChoice::AllGpus),
        _ => match s.split(':').collect::<Vec<_>>().as_slice() {
            ["opencl", p, d] => match (p.parse(), d.parse()) {
                (Ok(platform), Ok(device)) => Ok(DeviceChoice::OpenCl { platform, device }),
                _ => Err(format!(
                    "invalid device '{s}': expected opencl:PLATFORM:DEVICE with two indices"
                )),
            },
            _ => Err(format!(
                "invalid device '{s}': expected auto, cpu, gpu, gpu:all, opencl:PLATFORM:DEVICE or a comma list of cpu, gpu and opencl:P:D"
            )),
        },
    }
}

/// A comma list: every entry `cpu`, `gpu` or `opencl:P:D`, the CPU at most once. An error names
/// the entry (1-based) at fault.
fn parse_list(s: &str) -> Result<DeviceChoice, String> {
    let mut entries = Vec::new();
    for (i, text) in s.split(',').enumerate() {
        let at = |why: String| format!("invalid device list '{s}': entry {} {why}", i + 1);
        let text = text.trim();
        if text.is_empty() {
            return Err(at("is empty".into()));
        }
        let entry = parse_single(text).map_err(|_| {
            at(format!(
                "'{text}' is not cpu, gpu or opencl:PLATFORM:DEVICE"
            ))
        })?;
        match entry {
            DeviceChoice::Auto | DeviceChoice::AllGpus => {
                return Err(at(format!("'{text}' stands alone, not in a list")));
            }
            DeviceChoice::Cpu if entries.contains(&DeviceChoice::Cpu) => {
                return Err(at("'cpu': the CPU engine is listed twice".into()));
            }
            _ => entries.push(entry),
        }
    }
    Ok(DeviceChoice::List(entries))
}

impl std::str::FromStr for DeviceChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.contains(',') {
            parse_list(s)
        } else {
            parse_single(s)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_devices_and_lists_parse() {
        let p = |s: &str| s.parse::<DeviceChoice>();
        assert_eq!(p("gpu:all"), Ok(DeviceChoice::AllGpus));
        assert_eq!(
            p("opencl:1:0"),
            Ok(DeviceChoice::OpenCl {
                platform: 1,
                device: 0
            })
        );
        let list = p("opencl:0:0, opencl:0:0,cpu").expect("list");
        assert_eq!(list.to_string(), "opencl:0:0,opencl:0:0,cpu");
        assert!(list.is_multi());
        for (bad, says) in [
            ("opencl:0:0,,cpu", "entry 2 is empty"),
            ("cpu,tpu", "entry 2 'tpu'"),
            ("cpu,auto", "entry 2 'auto' stands alone"),
            ("gpu:all,cpu", "entry 1 'gpu:all' stands alone"),
            ("cpu,opencl:0:0,cpu", "entry 3 'cpu'"),
            ("opencl:x:0,cpu", "entry 1 'opencl:x:0'"),
        ] {
            let e = p(bad).expect_err(bad);
            assert!(e.contains(says), "{bad}: {e}");
        }
        assert!(p("gpu:some").is_err());
    }
}
