//! The one way a closed list of words (transports, ops, formats, noise
//! kinds, ...) is defined: [`vocabulary!`](crate::vocabulary), so no list
//! of spellings is written twice; ibprobe's CLI maps them to clap in
//! `cli/args.rs` from `ALL`, `name()`, `help()`. A crate that invokes it
//! needs `serde` among its own dependencies.

/// A configuration that cannot work, as one line: what, with which input,
/// what to do instead (exit 2). The `FromStr` error of every word list,
/// in any crate; ibprobe re-exports it as `spec::SpecError`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SpecError(pub String);

/// Defines a word list: a `Copy` enum whose variants carry their
/// spelling and a one-line help, with `ALL`, `name()`, `help()`,
/// `choices()`, `Display`, serde as the spelling and `FromStr`
/// (case-insensitive, `_` read as `-`; error "unknown WHAT ...: a | b").
/// `no_from_str` leaves `FromStr` to the caller (e.g. for aliases).
#[macro_export]
macro_rules! vocabulary {
    ($(#[$m:meta])* $name:ident, $what:literal { $($v:ident = $s:literal, $h:literal;)+ }) => {
        $crate::vocabulary!(@enum $(#[$m])* $name { $($v = $s, $h;)+ });
        impl std::str::FromStr for $name {
            type Err = $crate::words::SpecError;
            fn from_str(s: &str) -> Result<$name, $crate::words::SpecError> {
                let want = s.trim().to_ascii_lowercase().replace('_', "-");
                $name::ALL
                    .iter()
                    .copied()
                    .find(|v| v.name() == want)
                    .ok_or_else(|| $crate::words::SpecError(format!(
                        concat!("unknown ", $what, " {:?}: {}"), s, $name::choices()
                    )))
            }
        }
        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<$name, D::Error> {
                let s = String::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
    (no_from_str $(#[$m:meta])* $name:ident { $($v:ident = $s:literal, $h:literal;)+ }) => {
        $crate::vocabulary!(@enum $(#[$m])* $name { $($v = $s, $h;)+ });
    };
    (@enum $(#[$m:meta])* $name:ident { $($v:ident = $s:literal, $h:literal;)+ }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name { $(#[doc = $h] $v,)+ }

        impl $name {
            /// Every value, in the order the docs list them.
            pub const ALL: &'static [$name] = &[$($name::$v,)+];

            /// The spelling users write (and JSON carries).
            pub fn name(self) -> &'static str {
                match self { $($name::$v => $s,)+ }
            }

            /// What the value means, one line (docs and `--help`).
            pub fn help(self) -> &'static str {
                match self { $($name::$v => $h,)+ }
            }

            /// "a | b | c", for error messages.
            pub fn choices() -> String {
                $name::ALL.iter().map(|v| v.name()).collect::<Vec<_>>().join(" | ")
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.name())
            }
        }
    };
}
