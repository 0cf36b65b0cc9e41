//! The kernel command line a profile asks for (`[boot]`): the GRUB
//! fragment `plan --boot-fragment` prints and `apply --boot-file PATH`
//! writes.
//!
//! Why it exists: boot parameters cannot change at run time. `verify`
//! compares them with `/proc/cmdline` (`item.rs`, `Action::Boot`); this
//! file says them in the form a boot loader reads. ibtune writes the boot
//! loader's configuration only at a path the user names, as a journalled
//! file item (revert removes a file it created, restores one it changed),
//! and never runs update-grub.

use super::item::{Action, Cmp, Item};
use crate::host::HostRoot;
use crate::profile::resolve::BootParam;
use crate::profile::Resolved;
use serde::Serialize;

/// The parameters of `[boot]` as a GRUB line and its file.
#[derive(Debug, Clone, Serialize)]
pub struct BootFragment {
    /// Profile name.
    pub profile: String,
    /// `name=value` of every parameter, in profile order.
    pub parameters: Vec<String>,
    /// `GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX ..."`.
    pub fragment: String,
}

impl BootFragment {
    /// The fragment of `r`, or `None` when it asks for no boot parameter.
    pub fn of(r: &Resolved) -> Option<BootFragment> {
        Self::from_params(&r.name, &r.boot)
    }

    /// The fragment of profile `profile`'s parameters; `None` when empty.
    pub fn from_params(profile: &str, params: &[BootParam]) -> Option<BootFragment> {
        if params.is_empty() {
            return None;
        }
        let parameters: Vec<String> = params.iter().map(param).collect();
        Some(BootFragment {
            profile: profile.to_string(),
            fragment: format!(
                "GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX {}\"",
                parameters.join(" ")
            ),
            parameters,
        })
    }

    /// The file `apply --boot-file` writes: a comment naming its writer,
    /// then the fragment (a shell line: `/etc/default/grub.d/*.cfg` is
    /// sourced by update-grub after `/etc/default/grub`).
    pub fn file_text(&self) -> String {
        format!(
            "# Written by `ibtune apply` for profile {}; `ibtune revert` removes it.\n# Takes effect after update-grub (or grub2-mkconfig) and a reboot.\n{}\n",
            self.profile, self.fragment
        )
    }

    /// The journalled item that writes [`Self::file_text`] at host path
    /// `path` of `root`; blocked for a relative path or a missing folder.
    pub fn file_item(&self, path: &str, root: &HostRoot) -> Item {
        let folder = path.rsplit_once('/').map_or("", |(d, _)| d);
        let blocked = if !path.starts_with('/') {
            Some(format!("--boot-file {path:?} is not an absolute path"))
        } else if !folder.is_empty() && !root.is_dir(folder) {
            Some(format!(
                "--boot-file {path}: the folder {folder} does not exist; create it (GRUB on Debian reads /etc/default/grub.d/*.cfg) or name a file in an existing one"
            ))
        } else {
            None
        };
        Item {
            key: "boot/file".into(),
            what: format!("boot loader fragment {path}"),
            action: Action::File {
                path: path.to_string(),
                value: self.file_text(),
                cmp: Cmp::Text,
            },
            blocked,
        }
    }
}

fn param(b: &BootParam) -> String {
    format!("{}={}", b.name, b.value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fragment_appends_to_the_existing_line() {
        let p = |name: &str, value: &str| BootParam {
            name: name.into(),
            value: value.into(),
            required: false,
        };
        assert!(BootFragment::from_params("x", &[]).is_none());
        let f = BootFragment::from_params(
            "rt",
            &[
                p("isolcpus", "managed_irq,domain,2-3"),
                p("nohz_full", "2-3"),
            ],
        )
        .unwrap();
        assert_eq!(
            f.fragment,
            "GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX isolcpus=managed_irq,domain,2-3 nohz_full=2-3\""
        );
        assert!(f.file_text().ends_with(&format!("\n{}\n", f.fragment)));
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("etc/default/grub.d")).unwrap();
        let root = HostRoot::new(dir.path()).unwrap();
        let blocked = |p: &str| f.file_item(p, &root).blocked;
        assert!(blocked("etc/x.cfg")
            .unwrap()
            .contains("not an absolute path"));
        assert!(blocked("/etc/grub.d/ibtune.cfg")
            .unwrap()
            .contains("the folder /etc/grub.d does not exist"));
        assert_eq!(blocked("/etc/default/grub.d/ibtune.cfg"), None);
    }
}
