//! kubelet's limits on a pod's resolver (`formDNSConfigFitsLimits`), which are the API
//! server's validation limits (`MaxDNSNameservers`, `MaxDNSSearchPaths`,
//! `MaxDNSSearchListChars`) and the longest DNS-1123 subdomain.

use super::{DNS_CONFIG_FORMING, DnsEvent, Resolver};

pub(crate) const MAX_NAMESERVERS: usize = 3;
pub(crate) const MAX_SEARCHES: usize = 32;
pub(crate) const MAX_SEARCH_LINE: usize = 2048;
pub(crate) const MAX_SEARCH_DOMAIN: usize = 253;

/// K2: cuts what is over the limits, first nameservers then search paths, each cut told
/// in kubelet's `DNSConfigForming` Warning: the first 3 nameservers are kept; the first
/// 32 search paths, less any over 253 characters, less the last ones while the line is
/// over 2048 characters.
pub(crate) fn fit_limits(resolver: &mut Resolver) -> Vec<DnsEvent> {
    let mut events = Vec::new();
    if resolver.nameservers.len() > MAX_NAMESERVERS {
        resolver.nameservers.truncate(MAX_NAMESERVERS);
        events.push(DnsEvent {
            reason: DNS_CONFIG_FORMING,
            message: format!(
                "Nameserver limits were exceeded, some nameservers have been omitted, the \
                 applied nameserver line is: {}",
                resolver.nameservers.join(" ")
            ),
        });
    }
    let searches = &mut resolver.searches;
    let before = searches.len();
    searches.truncate(MAX_SEARCHES);
    searches.retain(|s| s.len() <= MAX_SEARCH_DOMAIN);
    let mut line = searches.join(" ").len();
    while line > MAX_SEARCH_LINE {
        let Some(last) = searches.pop() else { break };
        line = line.saturating_sub(last.len() + 1);
    }
    if searches.len() < before {
        events.push(DnsEvent {
            reason: DNS_CONFIG_FORMING,
            message: format!(
                "Search Line limits were exceeded, some search paths have been omitted, the \
                 applied search line is: {}",
                searches.join(" ")
            ),
        });
    }
    events
}
