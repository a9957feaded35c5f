//! IPv4 CIDR blocks as the network components write and check them.

use std::net::Ipv4Addr;
use std::ops::RangeInclusive;

/// An IPv4 network: its first address and prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    /// The first address.
    pub base: u32,
    /// The prefix length.
    pub prefix: u32,
}

impl Cidr {
    /// The block written as `key = "text"`, whose prefix must be in `prefixes` (`what` names
    /// the block in the error: "a VPC").
    pub fn parse(key: &str, text: &str, prefixes: RangeInclusive<u32>, what: &str) -> Result<Cidr, String> {
        let bad = || format!("`{key} = \"{text}\"` is not an IPv4 CIDR block such as \"10.0.0.0/16\"");
        let (ip, prefix) = text.split_once('/').ok_or_else(bad)?;
        let ip: Ipv4Addr = ip.parse().map_err(|_| bad())?;
        let prefix: u32 = prefix.parse().map_err(|_| bad())?;
        if !prefixes.contains(&prefix) {
            return Err(format!(
                "`{key} = \"{text}\"`: {what}'s prefix must be between /{} and /{}",
                prefixes.start(),
                prefixes.end()
            ));
        }
        let base = u32::from(ip);
        let cidr = Cidr {
            base: base & Cidr::mask(prefix),
            prefix,
        };
        if cidr.base != base {
            return Err(format!("`{key} = \"{text}\"` has host bits set; did you mean \"{cidr}\"?"));
        }
        Ok(cidr)
    }

    fn mask(prefix: u32) -> u32 {
        if prefix == 0 { 0 } else { u32::MAX << (32 - prefix) }
    }

    /// How many addresses it holds.
    pub fn size(self) -> u64 {
        1u64 << (32 - self.prefix)
    }

    /// Its `index`-th block of prefix `prefix` (counting from 0), if it holds that many.
    pub fn subnet(self, prefix: u32, index: u32) -> Option<Cidr> {
        let count = 1u64 << prefix.checked_sub(self.prefix)?;
        (prefix <= 32 && u64::from(index) < count).then(|| Cidr {
            base: self.base + (index << (32 - prefix)),
            prefix,
        })
    }

    /// Whether the two share an address.
    pub fn overlaps(self, other: Cidr) -> bool {
        let shorter = self.prefix.min(other.prefix);
        self.base & Cidr::mask(shorter) == other.base & Cidr::mask(shorter)
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", Ipv4Addr::from(self.base), self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_parse_and_overlap() {
        let a = Cidr::parse("cidr", "10.0.0.0/20", 8..=29, "a subnet").unwrap();
        let b = Cidr::parse("pods_cidr", "10.4.0.0/14", 8..=21, "a pods range").unwrap();
        let c = Cidr::parse("x", "10.0.8.0/24", 8..=29, "a subnet").unwrap();
        assert!(!a.overlaps(b) && a.overlaps(c) && c.overlaps(a));
        assert_eq!(a.size(), 4096);
        assert!(
            Cidr::parse("cidr", "10.0.0.1/20", 8..=29, "a subnet")
                .unwrap_err()
                .contains("did you mean \"10.0.0.0/20\"")
        );
        assert!(
            Cidr::parse("cidr", "10.0.0.0/30", 8..=29, "a subnet")
                .unwrap_err()
                .contains("between /8 and /29")
        );
    }
}
