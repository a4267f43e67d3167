//! libSoapySDR, loaded at run time (`dlopen` of `libSoapySDR.so.0.8`, the 0.8 ABI Debian and
//! most distributions ship), so fftd starts on machines without it and only a `soapy://` input
//! (or `fftd devices`) asks for it. Each C call the source needs is a function pointer found once
//! (`api()`); `Device` and `Stream` own what libSoapySDR made and give it back on drop. The
//! library's log goes to fftd's (`tracing`), not to stderr.
//!
//! Errors are the library's own words (`SoapySDRDevice_lastError`, `SoapySDR_errToStr`), as
//! plain strings: the source names the input around them.

use std::ffi::{c_char, c_int, c_long, c_longlong, c_void, CStr, CString};
use std::sync::OnceLock;

/// The shared objects tried, in order.
/// (Only the 0.8 ABI's: an unversioned libSoapySDR.so may be another ABI with the same symbol
/// names and other signatures.)
const LIBRARIES: [&str; 1] = ["libSoapySDR.so.0.8"];
/// `SOAPY_SDR_RX`.
const RX: c_int = 1;
/// `readStream`'s "nothing within the timeout" and "samples were lost" codes.
pub(super) const TIMEOUT: c_int = -1;
pub(super) const OVERFLOW: c_int = -4;

/// `SoapySDRKwargs`: one device's key=value pairs.
#[repr(C)]
struct Kwargs {
    size: usize,
    keys: *mut *mut c_char,
    vals: *mut *mut c_char,
}

type Handle = c_void;

/// `SoapySDRRange`: a range of values, such as a channel's gains in dB.
#[repr(C)]
struct Range {
    minimum: f64,
    maximum: f64,
    step: f64,
}

/// The entry points fftd calls (signatures from SoapySDR 0.8's Device.h, Types.h, Logger.h).
struct Api {
    enumerate: unsafe extern "C" fn(*const c_char, *mut usize) -> *mut Kwargs,
    kwargs_list_clear: unsafe extern "C" fn(*mut Kwargs, usize),
    make: unsafe extern "C" fn(*const c_char) -> *mut Handle,
    unmake: unsafe extern "C" fn(*mut Handle) -> c_int,
    last_error: unsafe extern "C" fn() -> *const c_char,
    set_sample_rate: unsafe extern "C" fn(*mut Handle, c_int, usize, f64) -> c_int,
    get_sample_rate: unsafe extern "C" fn(*const Handle, c_int, usize) -> f64,
    set_frequency: unsafe extern "C" fn(*mut Handle, c_int, usize, f64, *const Kwargs) -> c_int,
    set_gain: unsafe extern "C" fn(*mut Handle, c_int, usize, f64) -> c_int,
    set_gain_mode: unsafe extern "C" fn(*mut Handle, c_int, usize, bool) -> c_int,
    has_gain_mode: unsafe extern "C" fn(*const Handle, c_int, usize) -> bool,
    gain_range: unsafe extern "C" fn(*const Handle, c_int, usize) -> Range,
    num_channels: unsafe extern "C" fn(*const Handle, c_int) -> usize,
    stream_formats:
        unsafe extern "C" fn(*const Handle, c_int, usize, *mut usize) -> *mut *mut c_char,
    strings_clear: unsafe extern "C" fn(*mut *mut *mut c_char, usize),
    setup_stream: unsafe extern "C" fn(
        *mut Handle,
        c_int,
        *const c_char,
        *const usize,
        usize,
        *const Kwargs,
    ) -> *mut Handle,
    activate: unsafe extern "C" fn(*mut Handle, *mut Handle, c_int, c_longlong, usize) -> c_int,
    read: unsafe extern "C" fn(
        *mut Handle,
        *mut Handle,
        *const *mut c_void,
        usize,
        *mut c_int,
        *mut c_longlong,
        c_long,
    ) -> c_int,
    deactivate: unsafe extern "C" fn(*mut Handle, *mut Handle, c_int, c_longlong) -> c_int,
    close_stream: unsafe extern "C" fn(*mut Handle, *mut Handle) -> c_int,
    mtu: unsafe extern "C" fn(*const Handle, *mut Handle) -> usize,
    err_to_str: unsafe extern "C" fn(c_int) -> *const c_char,
    register_log_handler: unsafe extern "C" fn(Option<unsafe extern "C" fn(c_int, *const c_char)>),
}

/// libSoapySDR, or why it could not be loaded.
fn api() -> Result<&'static Api, String> {
    static API: OnceLock<Result<Api, String>> = OnceLock::new();
    API.get_or_init(load).as_ref().map_err(Clone::clone)
}

/// Whether libSoapySDR can be loaded here (for `fftd devices`).
pub(super) fn available() -> Result<(), String> {
    api().map(|_| ())
}

fn load() -> Result<Api, String> {
    let handle = LIBRARIES
        .iter()
        .find_map(|name| {
            let name = CString::new(*name).ok()?;
            // SAFETY: dlopen with a valid C string; the handle is kept for the whole process
            // (never dlclose'd), so the symbols found below stay valid.
            let h = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
            (!h.is_null()).then_some(h)
        })
        .ok_or_else(|| {
            "libSoapySDR is not installed (libSoapySDR.so.0.8 not found): install it and your device's module, such as `apt-get install libsoapysdr0.8 soapysdr0.8-module-all`".to_string()
        })?;
    // SAFETY: each `symbol` is SoapySDR 0.8's function of that name, whose C signature the
    // field's type repeats (Device.h, Types.h, Logger.h of SoapySDR 0.8).
    let api = unsafe {
        Api {
            enumerate: symbol(handle, "SoapySDRDevice_enumerateStrArgs")?,
            kwargs_list_clear: symbol(handle, "SoapySDRKwargsList_clear")?,
            make: symbol(handle, "SoapySDRDevice_makeStrArgs")?,
            unmake: symbol(handle, "SoapySDRDevice_unmake")?,
            last_error: symbol(handle, "SoapySDRDevice_lastError")?,
            set_sample_rate: symbol(handle, "SoapySDRDevice_setSampleRate")?,
            get_sample_rate: symbol(handle, "SoapySDRDevice_getSampleRate")?,
            set_frequency: symbol(handle, "SoapySDRDevice_setFrequency")?,
            set_gain: symbol(handle, "SoapySDRDevice_setGain")?,
            set_gain_mode: symbol(handle, "SoapySDRDevice_setGainMode")?,
            has_gain_mode: symbol(handle, "SoapySDRDevice_hasGainMode")?,
            gain_range: symbol(handle, "SoapySDRDevice_getGainRange")?,
            num_channels: symbol(handle, "SoapySDRDevice_getNumChannels")?,
            stream_formats: symbol(handle, "SoapySDRDevice_getStreamFormats")?,
            strings_clear: symbol(handle, "SoapySDRStrings_clear")?,
            setup_stream: symbol(handle, "SoapySDRDevice_setupStream")?,
            activate: symbol(handle, "SoapySDRDevice_activateStream")?,
            read: symbol(handle, "SoapySDRDevice_readStream")?,
            deactivate: symbol(handle, "SoapySDRDevice_deactivateStream")?,
            close_stream: symbol(handle, "SoapySDRDevice_closeStream")?,
            mtu: symbol(handle, "SoapySDRDevice_getStreamMTU")?,
            err_to_str: symbol(handle, "SoapySDR_errToStr")?,
            register_log_handler: symbol(handle, "SoapySDR_registerLogHandler")?,
        }
    };
    // SAFETY: `log_line` matches SoapySDRLogHandler and lives as long as the process.
    unsafe { (api.register_log_handler)(Some(log_line)) };
    Ok(api)
}

/// The function `name` of the library `handle`, as the function pointer type `T`.
///
/// # Safety
/// `handle` is a live dlopen handle and `T` is the pointer type of that function's signature.
unsafe fn symbol<T: Copy>(handle: *mut c_void, name: &str) -> Result<T, String> {
    assert_eq!(std::mem::size_of::<T>(), std::mem::size_of::<*mut c_void>());
    let c = CString::new(name).map_err(|_| name.to_string())?;
    // SAFETY: a live handle and a NUL-terminated name.
    let p = unsafe { libc::dlsym(handle, c.as_ptr()) };
    if p.is_null() {
        return Err(format!("libSoapySDR has no {name} (not the 0.8 API?)"));
    }
    // SAFETY: as the caller promises, `T` is a function pointer of the symbol's signature.
    Ok(unsafe { std::mem::transmute_copy::<*mut c_void, T>(&p) })
}

/// libSoapySDR's log, into fftd's: errors and warnings as warnings, the rest as debug lines.
unsafe extern "C" fn log_line(level: c_int, message: *const c_char) {
    // SAFETY: the library passes a NUL-terminated message valid for this call (or null).
    let text = unsafe { text_of(message) };
    match level {
        ..=4 => tracing::warn!("SoapySDR: {text}"),
        _ => tracing::debug!("SoapySDR: {text}"),
    }
}

/// A C string the library owns, copied (empty for null).
///
/// # Safety
/// `p` is null or points to a NUL-terminated string valid for this call.
unsafe fn text_of(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: as the caller promises.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// The library's last error on this thread, or `what` when it says nothing.
fn last_error(api: &Api, what: &str) -> String {
    // SAFETY: lastError returns a thread-local NUL-terminated string (possibly empty).
    let text = unsafe { text_of((api.last_error)()) };
    match text.is_empty() {
        true => what.to_string(),
        false => format!("{what}: {text}"),
    }
}

/// A `readStream` error code in words.
pub(super) fn error_name(code: c_int) -> String {
    match api() {
        // SAFETY: errToStr returns a static string for any code.
        Ok(api) => unsafe { text_of((api.err_to_str)(code)) },
        Err(_) => code.to_string(),
    }
}

/// The devices the installed modules find, each as its key=value pairs.
pub(super) fn enumerate(args: &str) -> Result<Vec<Vec<(String, String)>>, String> {
    let api = api()?;
    let args = CString::new(args).map_err(|_| "a NUL byte in the device arguments".to_string())?;
    let mut count = 0usize;
    // SAFETY: valid C string and count pointer; the list is freed below with its length.
    let list = unsafe { (api.enumerate)(args.as_ptr(), &mut count) };
    if list.is_null() {
        return Ok(Vec::new());
    }
    let mut devices = Vec::new();
    for i in 0..count {
        // SAFETY: `list` holds `count` Kwargs, each with `size` keys and values.
        let kw = unsafe { &*list.add(i) };
        let pairs = (0..kw.size)
            // SAFETY: indices below `size` are valid NUL-terminated strings of the list.
            .map(|k| unsafe { (text_of(*kw.keys.add(k)), text_of(*kw.vals.add(k))) })
            .collect();
        devices.push(pairs);
    }
    // SAFETY: frees the list enumerate returned, with its length.
    unsafe { (api.kwargs_list_clear)(list, count) };
    Ok(devices)
}

/// One device, made from its arguments (`driver=hackrf,serial=…`).
pub(super) struct Device {
    api: &'static Api,
    handle: *mut Handle,
}

// SAFETY: a SoapySDR device may be called from any thread, one call at a time; fftd calls each
// device (and its stream) from the one thread that reads it.
unsafe impl Send for Device {}

impl Device {
    pub(super) fn make(args: &str) -> Result<Device, String> {
        let api = api()?;
        let c = CString::new(args).map_err(|_| "a NUL byte in the device arguments".to_string())?;
        // SAFETY: valid C string; a null result is an error, else a device we unmake on drop.
        let handle = unsafe { (api.make)(c.as_ptr()) };
        if handle.is_null() {
            return Err(last_error(api, "no such device"));
        }
        Ok(Device { api, handle })
    }

    /// Checks a setter's result.
    fn check(&self, code: c_int, what: &str) -> Result<(), String> {
        match code {
            0 => Ok(()),
            _ => Err(last_error(self.api, what)),
        }
    }

    pub(super) fn rx_channels(&self) -> usize {
        // SAFETY: a live device handle.
        unsafe { (self.api.num_channels)(self.handle, RX) }
    }

    pub(super) fn set_rate(&self, channel: usize, rate: f64) -> Result<(), String> {
        // SAFETY: a live device handle; the channel was checked against rx_channels.
        let code = unsafe { (self.api.set_sample_rate)(self.handle, RX, channel, rate) };
        self.check(code, "cannot set the sample rate")
    }

    /// The rate the device runs at (drivers may round what was asked).
    pub(super) fn rate(&self, channel: usize) -> f64 {
        // SAFETY: a live device handle.
        unsafe { (self.api.get_sample_rate)(self.handle, RX, channel) }
    }

    pub(super) fn set_frequency(&self, channel: usize, hz: f64) -> Result<(), String> {
        // SAFETY: a live device handle; null tuning arguments are allowed.
        let code =
            unsafe { (self.api.set_frequency)(self.handle, RX, channel, hz, std::ptr::null()) };
        self.check(code, "cannot tune")
    }

    /// Automatic gain, or a gain in dB.
    pub(super) fn set_gain(&self, channel: usize, db: Option<f64>) -> Result<(), String> {
        // SAFETY: a live device handle.
        let code = unsafe { (self.api.set_gain_mode)(self.handle, RX, channel, db.is_none()) };
        self.check(code, "cannot set the gain mode")?;
        match db {
            // SAFETY: a live device handle.
            Some(db) => self.check(
                unsafe { (self.api.set_gain)(self.handle, RX, channel, db) },
                "cannot set the gain",
            ),
            None => Ok(()),
        }
    }

    /// Whether the channel has automatic gain (a driver without it ignores the mode).
    pub(super) fn has_automatic_gain(&self, channel: usize) -> bool {
        // SAFETY: a live device handle.
        unsafe { (self.api.has_gain_mode)(self.handle, RX, channel) }
    }

    /// The channel's lowest and highest overall gain in dB (0 to 0 where it has no gain to
    /// set: a driver without one ignores the gain).
    pub(super) fn gain_range(&self, channel: usize) -> (f64, f64) {
        // SAFETY: a live device handle; the range is returned by value.
        let range = unsafe { (self.api.gain_range)(self.handle, RX, channel) };
        let _ = range.step; // (drivers round to their steps themselves)
        (range.minimum, range.maximum)
    }

    /// The sample formats the channel streams (CF32, CS16, …).
    pub(super) fn formats(&self, channel: usize) -> Vec<String> {
        let mut count = 0usize;
        // SAFETY: a live device handle and a valid count pointer; the list is freed below.
        let mut list = unsafe { (self.api.stream_formats)(self.handle, RX, channel, &mut count) };
        if list.is_null() {
            return Vec::new();
        }
        // SAFETY: `list` holds `count` NUL-terminated strings.
        let formats = (0..count)
            .map(|i| unsafe { text_of(*list.add(i)) })
            .collect();
        // SAFETY: frees the list getStreamFormats returned, with its length.
        unsafe { (self.api.strings_clear)(&mut list, count) };
        formats
    }

    /// An activated receive stream of `channel` in `format`.
    pub(super) fn stream(self, channel: usize, format: &str) -> Result<Stream, String> {
        let f = CString::new(format).map_err(|_| "bad format".to_string())?;
        let channels = [channel];
        // SAFETY: a live device, a valid format string and one channel index; null args.
        let stream = unsafe {
            (self.api.setup_stream)(
                self.handle,
                RX,
                f.as_ptr(),
                channels.as_ptr(),
                1,
                std::ptr::null(),
            )
        };
        if stream.is_null() {
            return Err(last_error(self.api, "cannot set up a receive stream"));
        }
        // SAFETY: the stream just made on this device.
        let code = unsafe { (self.api.activate)(self.handle, stream, 0, 0, 0) };
        let stream = Stream {
            device: self,
            handle: stream,
        };
        match code {
            0 => Ok(stream),
            _ => Err(last_error(
                stream.device.api,
                &format!("cannot start the stream ({})", error_name(code)),
            )),
        }
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        // SAFETY: the handle came from make and is given back once.
        unsafe { (self.api.unmake)(self.handle) };
    }
}

/// A receive stream, with the device it belongs to.
pub(super) struct Stream {
    device: Device,
    handle: *mut Handle,
}

// SAFETY: as `Device`: used from one thread at a time.
unsafe impl Send for Stream {}

impl Stream {
    /// The most elements one read gives.
    pub(super) fn mtu(&self) -> usize {
        // SAFETY: a live device and stream.
        unsafe { (self.device.api.mtu)(self.device.handle, self.handle) }
    }

    /// Reads up to `elements` samples into `buffer` (which holds at least that many, in the
    /// stream's format), waiting at most `timeout_us`: the count, or a negative error code.
    pub(super) fn read(&mut self, buffer: *mut c_void, elements: usize, timeout_us: i64) -> c_int {
        let buffers = [buffer];
        let (mut flags, mut time_ns) = (0 as c_int, 0 as c_longlong);
        // SAFETY: a live device and stream; one channel buffer of at least `elements` samples,
        // as the caller promises; flags and time are valid out-pointers.
        unsafe {
            (self.device.api.read)(
                self.device.handle,
                self.handle,
                buffers.as_ptr(),
                elements,
                &mut flags,
                &mut time_ns,
                timeout_us as c_long,
            )
        }
    }

    pub(super) fn retune(&self, channel: usize, hz: f64) -> Result<(), String> {
        self.device.set_frequency(channel, hz)
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // SAFETY: the stream is live and closed once, before its device is unmade.
        unsafe {
            (self.device.api.deactivate)(self.device.handle, self.handle, 0, 0);
            (self.device.api.close_stream)(self.device.handle, self.handle);
        }
    }
}
