//! The price cache: every price read from a price list, with when it was read and the
//! endpoint it came from (an emulator's prices never stand for the cloud's), in
//! `$XDG_CACHE_HOME/forge/prices.json` (else `~/.cache/forge/prices.json`). A price younger than
//! the cache's life (a week; `FORGE_PRICES_MAX_AGE`, e.g. `1d`) is used without a call; a price
//! the list does not hold is cached too, so it is not asked for again on every plan; older
//! entries are dropped when the cache is written.

use super::{Prices, Rate};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

/// How long a cached price is used by default: a week.
pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);

/// One cached answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Entry {
    /// The rate it answers.
    rate: Rate,
    /// The endpoint of the price list that answered.
    source: String,
    /// USD per the rate's unit; `None`: the price list holds none.
    usd: Option<f64>,
    /// What was asked, for a price the list does not hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    asked: Option<String>,
    /// When it was read (RFC 3339).
    fetched: String,
}

/// The cache file's content.
#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    /// The cache format.
    version: u32,
    /// By endpoint and rate key.
    prices: BTreeMap<String, Entry>,
}

/// The price cache, loaded.
pub struct PriceCache {
    path: Option<PathBuf>,
    file: File,
    max_age: Duration,
}

impl PriceCache {
    /// Loads the user's cache; an unreadable or damaged one is an empty cache (it is only a
    /// cache), as is one without a home directory to live in.
    pub fn load() -> Result<PriceCache, String> {
        let path = std::env::var_os("XDG_CACHE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME")
                    .filter(|v| !v.is_empty())
                    .map(|home| PathBuf::from(home).join(".cache"))
            })
            .map(|dir| dir.join("forge").join("prices.json"));
        let max_age = match std::env::var("FORGE_PRICES_MAX_AGE").ok().filter(|v| !v.is_empty()) {
            Some(text) => humantime::parse_duration(&text)
                .map_err(|e| format!("FORGE_PRICES_MAX_AGE `{text}` is not a duration ({e}); write e.g. `7d` or `12h`"))?,
            None => DEFAULT_MAX_AGE,
        };
        let file = path
            .as_ref()
            .and_then(|p| std::fs::read(p).ok())
            .and_then(|bytes| serde_json::from_slice::<File>(&bytes).ok())
            .filter(|f| f.version == 1)
            .unwrap_or_default();
        Ok(PriceCache { path, file, max_age })
    }

    /// The cached prices of `rates` that are still fresh at `now`, each from the endpoint
    /// `source` names for it, and the rates to ask for.
    pub fn fresh(&self, rates: &BTreeSet<Rate>, now: SystemTime, source: &dyn Fn(&Rate) -> String) -> (Prices, BTreeSet<Rate>) {
        let mut prices = Prices::default();
        let mut stale = BTreeSet::new();
        for rate in rates {
            let entry = self.file.prices.get(&key(&source(rate), rate)).filter(|e| self.young(e, now));
            match entry {
                Some(entry) => {
                    match entry.usd {
                        Some(usd) => prices.found.insert(rate.clone(), usd),
                        None => {
                            prices.missing.insert(rate.clone(), entry.asked.clone().unwrap_or_default());
                            None
                        }
                    };
                    let day = entry.fetched.get(..10).unwrap_or_default().to_owned();
                    prices.fetched = Some(prices.fetched.map_or(day.clone(), |d| d.min(day)));
                }
                None => {
                    stale.insert(rate.clone());
                }
            }
        }
        (prices, stale)
    }

    /// Whether `entry` is within the cache's life at `now`.
    fn young(&self, entry: &Entry, now: SystemTime) -> bool {
        humantime::parse_rfc3339(&entry.fetched).is_ok_and(|at| now.duration_since(at).is_ok_and(|age| age <= self.max_age))
    }

    /// Records what the price lists answered at `now` (each rate from the endpoint `source`
    /// names), drops what is past the cache's life, and writes the cache (atomically: a reader
    /// sees the old file or the new one). A cache that cannot be written is skipped.
    pub fn record(&mut self, answered: &Prices, now: SystemTime, source: &dyn Fn(&Rate) -> String) {
        let fetched = humantime::format_rfc3339_seconds(now).to_string();
        let found = answered.found.iter().map(|(rate, usd)| (rate, Some(*usd), None));
        let missing = answered.missing.iter().map(|(rate, asked)| (rate, None, Some(asked.clone())));
        for (rate, usd, asked) in found.chain(missing) {
            let entry = Entry {
                rate: rate.clone(),
                source: source(rate),
                usd,
                asked,
                fetched: fetched.clone(),
            };
            self.file.prices.insert(key(&entry.source, rate), entry);
        }
        let file = std::mem::take(&mut self.file.prices);
        self.file.prices = file.into_iter().filter(|(_, e)| self.young(e, now)).collect();
        let Some(path) = &self.path else { return };
        self.file.version = 1;
        let tmp = path.with_extension(format!("json.{}.tmp", std::process::id()));
        let written = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&tmp, serde_json::to_vec_pretty(&self.file).expect("the cache serializes")))
            .and_then(|()| std::fs::rename(&tmp, path));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }
}

/// An entry's key: the endpoint and the rate.
fn key(source: &str, rate: &Rate) -> String {
    format!("{source} {}", rate.key())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate() -> Rate {
        Rate::NatGateway {
            region: "us-west-2".into(),
        }
    }

    #[test]
    fn a_price_is_fresh_for_the_caches_life_then_asked_again() {
        let mut cache = PriceCache {
            path: None,
            file: File::default(),
            max_age: DEFAULT_MAX_AGE,
        };
        let then = humantime::parse_rfc3339("2026-11-20T10:00:00Z").unwrap();
        let answered = Prices {
            found: BTreeMap::from([(rate(), 0.045)]),
            ..Default::default()
        };
        let aws = |_: &Rate| "https://aws".to_owned();
        cache.record(&answered, then, &aws);
        let rates = BTreeSet::from([rate()]);
        let (prices, stale) = cache.fresh(&rates, then + Duration::from_secs(6 * 24 * 3600), &aws);
        assert_eq!(prices.found.get(&rate()), Some(&0.045));
        assert_eq!(prices.fetched.as_deref(), Some("2026-11-20"));
        assert!(stale.is_empty());
        // Another endpoint's prices (an emulator's) are not the cloud's.
        let emulator = |_: &Rate| "http://127.0.0.1:5000".to_owned();
        assert_eq!(cache.fresh(&rates, then, &emulator).1, rates);
        let (prices, stale) = cache.fresh(&rates, then + Duration::from_secs(8 * 24 * 3600), &aws);
        assert!(prices.found.is_empty());
        assert_eq!(stale, rates);
    }
}
