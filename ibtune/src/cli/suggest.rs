//! `ibtune suggest`: its flags, turned into an [`Intent`], and the
//! command that discovers the host and prints the suggested profile.
//!
//! Why it exists: the rules live in the library
//! ([`crate::profile::suggest`], which never sees clap); this file only
//! parses what the user typed with the toolkit's grammar (`ibhost::list`
//! for names, CPU lists as the kernel writes them) and maps the outcome to
//! the toolkit's exit codes.

use super::exit;
use crate::host::{self, CpuSet, HostRoot};
use crate::profile::suggest::{self, HcaChoice, HugePages, Intent, Isolate, SuggestError};
use anyhow::Result;
use clap::Args;

/// `suggest --help`'s epilogue: examples and its exit codes.
pub const SUGGEST_HELP: &str = "\
Examples:
  ibtune suggest > my.toml && ibtune plan my.toml
      # this host's starting profile, then what it would change
      # (needs an RDMA device: runs in the lab)
  ibtune --root tests/fixtures/thesis-2s-mlx5 suggest --isolate 4 \\
       --hca mlx5_0 --reserve 0-1
      # a snapshot of a host: 4 cores for mlx5_0, CPUs 0-1 kept
  ibtune --root tests/fixtures/thesis-2s-mlx5 suggest --hca none
      # no HCA: isolated cores alone
  ibtune --root tests/fixtures/amd-4node suggest --json

Exit codes: 0 the profile is printed; 2 bad input (an HCA that is not
there, an offline --reserve CPU, a --hugepage-pool size other than 2M or
1G); 3 the host cannot be tuned as asked, and the reason is printed
instead of a profile (one CPU, no HCA without --hca none, no cpuset
controller, a node without the cores asked for).";

/// What `suggest` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SuggestFormat {
    /// The profile as TOML, a comment above every choice (save it and pass it to plan).
    Toml,
    /// `ibtune.suggest/1`: the profile as data, each key's reason, the layout.
    Json,
}

/// The flags of `ibtune suggest`.
#[derive(Debug, Clone, Args)]
pub struct SuggestArgs {
    /// HCAs to place isolated cores next to, comma-separated (e.g.
    /// mlx5_0,mlx5_1), or none for isolated cores alone [default: every
    /// RDMA device found].
    #[arg(long, value_name = "LIST", value_parser = parse_hcas)]
    pub hca: Option<HcaChoice>,
    /// Whole cores to isolate per HCA, on its NUMA node, or auto: 2 per
    /// HCA, fewer where its node cannot spare them beyond one housekeeping
    /// core.
    #[arg(long, value_name = "N", default_value = "auto", value_parser = parse_isolate)]
    pub isolate: Isolate,
    /// CPUs that stay housekeeping, as a kernel CPU list (e.g. 0-1,24-25);
    /// their whole cores stay with them.
    #[arg(long, value_name = "LIST", value_parser = parse_reserve)]
    pub reserve: Option<CpuSet>,
    /// Huge pages as SIZE:COUNT (2M or 1G, e.g. 1G:8, 2M:1024): COUNT
    /// pages on each NUMA node of the isolated cores ([[hugepages]]).
    #[arg(long, value_name = "SIZE:COUNT", value_parser = parse_hugepages)]
    pub hugepage_pool: Option<HugePages>,
    /// Output format: toml (a profile with a comment on every choice), or
    /// json.
    #[arg(short = 'f', long, value_enum, default_value_t = SuggestFormat::Toml)]
    pub format: SuggestFormat,
    /// Same as --format json.
    #[arg(long)]
    pub json: bool,
}

impl SuggestArgs {
    /// The user's intent, as the library takes it.
    pub fn intent(&self) -> Intent {
        Intent {
            hcas: self.hca.clone().unwrap_or(HcaChoice::Every),
            isolate: self.isolate,
            reserve: self.reserve.clone().unwrap_or_default(),
            hugepages: self.hugepage_pool,
        }
    }
}

/// Runs `suggest`: 0 with the profile on stdout; 2 for an intent this host
/// or the profile cannot take (an unknown HCA, an offline CPU, a huge
/// page pool); 3 with the reason when the host cannot be tuned as asked.
pub fn run(args: &SuggestArgs, root: &HostRoot) -> Result<i32> {
    let host = host::discover(root)?;
    for p in &host.read_problems {
        eprintln!("ibtune: warning: {p}");
    }
    match suggest::suggest(&host, &args.intent()) {
        Ok(s) => {
            if args.json || args.format == SuggestFormat::Json {
                super::output::json(&s.to_json())?;
            } else {
                print!("{}", s.to_toml());
            }
            Ok(exit::OK)
        }
        Err(SuggestError::Input(m)) => {
            eprintln!("ibtune suggest: {m}");
            Ok(exit::ERROR)
        }
        Err(SuggestError::CannotTune(m)) => {
            eprintln!("ibtune suggest: no profile for this host: {m}");
            Ok(exit::CANNOT_TUNE)
        }
    }
}

/// `--hca`: `none`, or device names (the toolkit's list grammar: no empty
/// item, none twice).
pub fn parse_hcas(s: &str) -> Result<HcaChoice, String> {
    if s.trim() == "none" {
        return Ok(HcaChoice::None);
    }
    let hint =
        "name RDMA devices as `ibtune show` lists them, e.g. --hca mlx5_0,mlx5_1, or --hca none";
    let names = ibhost::list::parse_list(
        "--hca",
        s,
        hint,
        |it| {
            if it == "none" {
                Err("none stands alone: it means no HCA at all".into())
            } else {
                Ok(vec![it.to_string()])
            }
        },
        |v| v.clone(),
    )?;
    Ok(HcaChoice::Named(names))
}

/// `--isolate`: `auto` or a count of cores, 1 or more.
pub fn parse_isolate(s: &str) -> Result<Isolate, String> {
    let t = s.trim();
    if t == "auto" {
        return Ok(Isolate::Auto);
    }
    match t.parse::<usize>() {
        Ok(n) if n > 0 => Ok(Isolate::Cores(n)),
        _ => Err(format!(
            "{s:?} is not a number of cores; give cores per HCA (1 or more), e.g. --isolate 2, or --isolate auto"
        )),
    }
}

/// `--reserve`: a kernel CPU list, not empty.
pub fn parse_reserve(s: &str) -> Result<CpuSet, String> {
    match CpuSet::parse_list(s) {
        Ok(c) if !c.is_empty() => Ok(c),
        Ok(_) => Err(
            "the list is empty; give CPUs as the kernel writes them, e.g. --reserve 0-1,24-25"
                .into(),
        ),
        Err(e) => Err(format!("{e}; e.g. --reserve 0-1,24-25")),
    }
}

/// `--hugepage-pool`: SIZE (a number with K, M or G) and COUNT (1 or more).
pub fn parse_hugepages(s: &str) -> Result<HugePages, String> {
    let hint = "write SIZE:COUNT, e.g. 1G:8 or 2M:1024";
    let (size, count) = s
        .split_once(':')
        .ok_or_else(|| format!("{s:?} has no ':'; {hint}"))?;
    let size = size.trim();
    let (num, unit) =
        size.split_at(size.len() - size.trim_start_matches(|c: char| c.is_ascii_digit()).len());
    let kb: u64 = match unit.to_ascii_uppercase().as_str() {
        "K" => 1,
        "M" => 1024,
        "G" => 1024 * 1024,
        _ => return Err(format!("page size {size:?} needs a unit K, M or G; {hint}")),
    };
    let size_kb = num
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(kb))
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("page size {size:?} is not a size; {hint}"))?;
    let count = count
        .trim()
        .parse::<u64>()
        .ok()
        .filter(|c| *c > 0)
        .ok_or_else(|| format!("count {count:?} is not a number of pages (1 or more); {hint}"))?;
    Ok(HugePages { size_kb, count })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_become_an_intent() {
        assert_eq!(parse_hcas("none").unwrap(), HcaChoice::None);
        assert_eq!(
            parse_hcas("mlx5_0, mlx5_1").unwrap(),
            HcaChoice::Named(vec!["mlx5_0".into(), "mlx5_1".into()])
        );
        assert!(parse_hcas("mlx5_0,mlx5_0")
            .unwrap_err()
            .contains("listed twice"));
        assert!(parse_hcas("mlx5_0,none")
            .unwrap_err()
            .contains("stands alone"));
        assert!(parse_hcas("mlx5_0,").unwrap_err().contains("empty item"));
        assert_eq!(parse_isolate("auto").unwrap(), Isolate::Auto);
        assert_eq!(parse_isolate("3").unwrap(), Isolate::Cores(3));
        assert!(parse_isolate("0").is_err());
        assert!(parse_isolate("two").unwrap_err().contains("--isolate auto"));
        assert_eq!(parse_reserve("0-1,4").unwrap().to_list(), "0-1,4");
        assert!(parse_reserve("").is_err());
        assert!(parse_reserve("3-1").is_err());
        assert_eq!(
            parse_hugepages("1G:8").unwrap(),
            HugePages {
                size_kb: 1 << 20,
                count: 8
            }
        );
        assert_eq!(parse_hugepages("2m:1024").unwrap().size_kb, 2048);
        assert!(parse_hugepages("1G").unwrap_err().contains("SIZE:COUNT"));
        assert!(parse_hugepages("1T:2").unwrap_err().contains("unit"));
        assert!(parse_hugepages("1G:0").unwrap_err().contains("count"));
        assert!(parse_hugepages(":3").is_err());
    }
}
