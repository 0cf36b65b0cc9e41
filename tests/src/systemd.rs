//! The shipped systemd units, checked with the real `systemd-analyze
//! verify`.
//!
//! Why it exists: a unit file with a misspelt key or value still "loads"
//! (systemd ignores the line and says so once in the journal), so a unit
//! is only known to be right when systemd's own parser has nothing to say
//! about it. ibtune's and ibexporter's tests use the same check.

use std::fs;
use std::path::Path;
use std::process::Command;

/// Verifies the unit file `unit` with `systemd-analyze verify` after
/// pointing each `/usr/local/bin/<name>` in it at the built binary given
/// in `binaries` (verify checks that ExecStart is executable). A template
/// (`x@.service`) is verified as its instance `x@<instance>.service`.
///
/// Ok only when systemd-analyze exits 0 and prints nothing: it exits 0
/// for settings it ignores, and says so on stderr.
pub fn verify_unit(unit: &Path, binaries: &[(&str, &Path)], instance: &str) -> Result<(), String> {
    verify(unit, binaries, instance, None)
}

/// [`verify_unit`] with `man_dir` as `MANPATH`: verify runs `man` on the
/// unit's `Documentation=man:...` pages, which a built tool has only as
/// `TOOL --generate-docs DIR` output until it is installed.
pub fn verify_unit_with_man(
    unit: &Path,
    binaries: &[(&str, &Path)],
    instance: &str,
    man_dir: &Path,
) -> Result<(), String> {
    verify(unit, binaries, instance, Some(man_dir))
}

fn verify(
    unit: &Path,
    binaries: &[(&str, &Path)],
    instance: &str,
    man_dir: Option<&Path>,
) -> Result<(), String> {
    let name = unit
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| format!("{}: not a unit file name", unit.display()))?;
    let mut text =
        fs::read_to_string(unit).map_err(|e| format!("reading {}: {e}", unit.display()))?;
    for (bin, path) in binaries {
        text = text.replace(
            &format!("/usr/local/bin/{bin}"),
            &path.display().to_string(),
        );
    }
    let dir = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
    fs::write(dir.path().join(name), text).map_err(|e| format!("writing the copy: {e}"))?;
    let target = match name.split_once("@.") {
        Some((stem, kind)) => format!("{stem}@{instance}.{kind}"),
        None => name.to_string(),
    };
    let mut cmd = Command::new("systemd-analyze");
    if let Some(m) = man_dir {
        cmd.env("MANPATH", m);
    }
    let out = cmd
        .arg("verify")
        .arg(dir.path().join(&target))
        .output()
        .map_err(|e| {
            format!(
                "systemd-analyze: {e}; it comes with the systemd package \
                 (`apt-get install systemd`; scripts/setup installs it)"
            )
        })?;
    crate::quiet_success(
        &format!("systemd-analyze verify {target} ({})", unit.display()),
        &out,
        |_| false,
    )
}

/// The arguments of the unit's `ExecStart=/usr/local/bin/<bin> ...`,
/// with `%i` replaced by `instance`.
///
/// Why it exists: a unit's command line must be one the binary accepts;
/// the tests run the binary with these arguments.
pub fn exec_start_args(unit: &Path, bin: &str, instance: &str) -> Result<Vec<String>, String> {
    exec_args(unit, "ExecStart", bin, instance)
}

/// The arguments of the unit's `<key>=/usr/local/bin/<bin> ...` (key:
/// `ExecStart`, `ExecStop` ...), with `%i` replaced by `instance`.
pub fn exec_args(unit: &Path, key: &str, bin: &str, instance: &str) -> Result<Vec<String>, String> {
    let text = fs::read_to_string(unit).map_err(|e| format!("reading {}: {e}", unit.display()))?;
    let prefix = format!("{key}=/usr/local/bin/{bin}");
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .ok_or_else(|| format!("{}: no {prefix} line", unit.display()))?;
    Ok(line
        .replace("%i", instance)
        .split_whitespace()
        .map(String::from)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The check fails on what systemd ignores (a bad value), on a
    /// missing binary, and passes on a correct unit: it can fail.
    #[test]
    fn verify_catches_ignored_settings_and_missing_binaries() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, body: &str| {
            let p = dir.path().join(name);
            fs::write(&p, format!("[Unit]\nDescription=t\n[Service]\n{body}\n")).unwrap();
            p
        };
        let sh = Path::new("/bin/sh");
        let good = write("good.service", "ExecStart=/usr/local/bin/sh -c true");
        verify_unit(&good, &[("sh", sh)], "").unwrap();
        let bad_value = write(
            "bad@.service",
            "ExecStart=/usr/local/bin/sh -c true\nRestart=sometimes",
        );
        let e = verify_unit(&bad_value, &[("sh", sh)], "0").unwrap_err();
        assert!(e.contains("sometimes"), "{e}");
        let missing = write("missing.service", "ExecStart=/usr/local/bin/nothere");
        let e = verify_unit(&missing, &[], "").unwrap_err();
        assert!(e.contains("nothere"), "{e}");
    }
}
