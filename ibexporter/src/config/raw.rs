//! The configuration as written in the TOML: every key optional, every
//! value kept with its position ([`S`]), nothing checked beyond its TOML
//! type.
//!
//! Why it exists: `convert` needs the span of each value to say where a
//! wrong one is (`file:line:col`), and unknown keys must be refused
//! (`deny_unknown_fields`) rather than ignored.
//!
//! The three `[[targets.*]]` entry kinds share their trailing keys
//! (`labels`, `transport`, `op`, `sizes`). serde's `flatten` would share
//! them as one struct, but it cannot be combined with
//! `deny_unknown_fields`, so the `target_entry!` macro writes them into
//! each entry instead and [`TargetEntry`] reads them back.

use serde::Deserialize;
use std::collections::BTreeMap;
use toml::Spanned;

use super::error::{ConfigError, Ctx};

/// A value and its byte range in the text.
pub(super) type S<T> = Spanned<T>;
/// `labels = { name = "value", ... }` with positions.
pub(super) type RawLabels = BTreeMap<S<String>, S<String>>;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    pub(super) listen: Option<S<String>>,
    pub(super) web_config: Option<S<String>>,
    pub(super) secret_file: Option<S<String>>,
    pub(super) source: Option<S<String>>,
    #[serde(default)]
    pub(super) local: RawLocal,
    #[serde(default)]
    pub(super) probe: RawProbe,
    #[serde(default)]
    pub(super) budget: RawBudget,
    #[serde(default)]
    pub(super) responder: RawResponder,
    #[serde(default)]
    pub(super) targets: RawTargets,
    #[serde(default)]
    pub(super) cardinality: RawCardinality,
    #[serde(default)]
    pub(super) tuning: RawTuning,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLocal {
    pub(super) hca_loopback: Option<bool>,
    pub(super) reference: Option<Vec<S<String>>>,
    pub(super) host_wakeup: Option<bool>,
    pub(super) wakeup_cpus: Option<S<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawProbe {
    pub(super) interval: Option<S<String>>,
    pub(super) probes_per_interval: Option<S<i64>>,
    pub(super) rate_hz: Option<S<f64>>,
    pub(super) timeout: Option<S<String>>,
    pub(super) poll: Option<S<String>>,
    pub(super) window: Option<S<String>>,
    pub(super) sizes: Option<S<Vec<S<i64>>>>,
    pub(super) transport: Option<S<String>>,
    pub(super) op: Option<S<String>>,
    pub(super) hw_timestamps: Option<S<bool>>,
    pub(super) perf_counters: Option<S<bool>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBudget {
    pub(super) max_core_fraction: Option<S<f64>>,
    pub(super) min_interval: Option<S<String>>,
    pub(super) max_interval: Option<S<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawResponder {
    pub(super) enabled: Option<bool>,
    pub(super) bind: Option<S<String>>,
    pub(super) max_session_memory: Option<S<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTargets {
    pub(super) skip_self: Option<bool>,
    pub(super) resolve_timeout: Option<S<String>>,
    pub(super) plan: Option<S<String>>,
    pub(super) plan_rack_label: Option<S<String>>,
    pub(super) plan_rack_peers: Option<S<i64>>,
    #[serde(rename = "static", default)]
    pub(super) static_: Vec<S<RawStatic>>,
    #[serde(default)]
    pub(super) file_sd: Vec<S<RawFileSd>>,
    #[serde(default)]
    pub(super) dns: Vec<S<RawDns>>,
}

/// The keys every `[[targets.*]]` entry has after its own: its labels and
/// how it is probed (what it leaves out comes from `[probe]`).
pub(super) trait TargetEntry {
    fn labels(&self) -> &RawLabels;
    fn transport(&self) -> Option<&S<String>>;
    fn op(&self) -> Option<&S<String>>;
    fn sizes(&self) -> Option<&S<Vec<S<i64>>>>;
}

/// Declares a `[[targets.*]]` entry: the keys given, then `labels`,
/// `transport`, `op`, `sizes` (in that order: serde lists the keys in
/// declaration order in its "expected one of" messages), and its
/// [`TargetEntry`] impl.
macro_rules! target_entry {
    ($name:ident { $($field:ident: $ty:ty,)* }) => {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        pub(super) struct $name {
            $(pub(super) $field: $ty,)*
            #[serde(default)]
            pub(super) labels: RawLabels,
            pub(super) transport: Option<S<String>>,
            pub(super) op: Option<S<String>>,
            pub(super) sizes: Option<S<Vec<S<i64>>>>,
        }

        impl TargetEntry for $name {
            fn labels(&self) -> &RawLabels {
                &self.labels
            }
            fn transport(&self) -> Option<&S<String>> {
                self.transport.as_ref()
            }
            fn op(&self) -> Option<&S<String>> {
                self.op.as_ref()
            }
            fn sizes(&self) -> Option<&S<Vec<S<i64>>>> {
                self.sizes.as_ref()
            }
        }
    };
}

target_entry!(RawStatic {
    host: S<String>,
    port: Option<S<i64>>,
});

target_entry!(RawFileSd {
    path: S<String>,
    refresh: Option<S<String>>,
    port: Option<S<i64>>,
});

target_entry!(RawDns {
    name: S<String>,
    port: Option<S<i64>>,
    refresh: Option<S<String>>,
});

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCardinality {
    pub(super) max_peer_series: Option<S<i64>>,
    pub(super) group_label: Option<S<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTuning {
    pub(super) profile: Option<S<String>>,
    pub(super) root: Option<S<String>>,
    pub(super) state_dir: Option<S<String>>,
    pub(super) min_interval: Option<S<String>>,
}

/// Reads the text of `cx` into the raw shape; a TOML syntax error, an
/// unknown key or a value of the wrong TOML type is refused here.
pub(super) fn parse(cx: &Ctx) -> Result<RawConfig, ConfigError> {
    let de = toml::de::Deserializer::parse(cx.text).map_err(|e| cx.toml(&e, None))?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        // Spanned<T> adds an internal segment; it means nothing to users.
        let path = e
            .path()
            .to_string()
            .replace(".$__serde_spanned_private_value", "");
        let path = (path != "." && !path.is_empty()).then_some(path);
        cx.toml(e.inner(), path)
    })
}
