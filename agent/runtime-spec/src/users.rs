//! The container's user and groups from the image's `/etc/passwd` and `/etc/group`, as
//! kubelet and containerd's CRI plugin resolve them (`oci.WithUser`,
//! `oci.WithAdditionalGIDs`).
//!
//! kubelet passes `runAsUser`, else the image USER's user part (its group part is
//! dropped), and `runAsGroup`. containerd then:
//! - a numeric uid takes its primary gid from the passwd entry with that uid (0 when
//!   there is none, or no passwd file);
//! - a user name must be in passwd (uid and gid from its entry);
//! - `runAsGroup` replaces the gid;
//! - the supplementary groups are those of `/etc/group` that list the user by name
//!   (except a group named as the user), then the pod's `supplementalGroups` and
//!   `fsGroup`.
//!
//! The files are parsed here (no maintained crate parses passwd text rather than the
//! host's database through libc): `name:password:uid:gid:gecos:home:shell` and
//! `name:password:gid:member,member`; blank lines, `#` comments and lines that do not
//! parse are skipped, as libc's readers do.

/// One `/etc/passwd` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PasswdEntry {
    pub(super) name: String,
    pub(super) uid: u32,
    pub(super) gid: u32,
}

/// One `/etc/group` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct GroupEntry {
    pub(super) name: String,
    pub(super) gid: u32,
    pub(super) members: Vec<String>,
}

pub(super) fn parse_passwd(text: &str) -> Vec<PasswdEntry> {
    entries(text)
        .filter_map(|fields| {
            let [name, _password, uid, gid, ..] = fields.as_slice() else { return None };
            Some(PasswdEntry {
                name: (*name).to_owned(),
                uid: uid.parse().ok()?,
                gid: gid.parse().ok()?,
            })
        })
        .collect()
}

pub(super) fn parse_group(text: &str) -> Vec<GroupEntry> {
    entries(text)
        .filter_map(|fields| {
            let [name, _password, gid, rest @ ..] = fields.as_slice() else { return None };
            let members = rest.first().copied().unwrap_or_default();
            Some(GroupEntry {
                name: (*name).to_owned(),
                gid: gid.parse().ok()?,
                members: members
                    .split(',')
                    .map(str::trim)
                    .filter(|m| !m.is_empty())
                    .map(str::to_owned)
                    .collect(),
            })
        })
        .collect()
}

/// The `:`-separated fields of each line that is not blank or a comment.
fn entries(text: &str) -> impl Iterator<Item = Vec<&str>> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(|line| line.split(':').collect())
        .filter(|fields: &Vec<&str>| !fields[0].is_empty())
}

/// Who the container runs as before the files are read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum UserRef {
    Id(u32),
    Name(String),
}

impl UserRef {
    /// An image USER (`user`, `user:group`, `uid`, `uid:gid`, or empty for root): its
    /// user part, as kubelet reads it.
    pub(super) fn of_image(user: &str) -> UserRef {
        let user = user.split(':').next().unwrap_or_default();
        match user {
            "" => UserRef::Id(0),
            _ => user.parse().map_or_else(|_| UserRef::Name(user.to_owned()), UserRef::Id),
        }
    }
}

/// The resolved uid, gid and the image's supplementary groups of the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Resolved {
    pub(super) uid: u32,
    pub(super) gid: u32,
    pub(super) groups: Vec<u32>,
}

/// What cannot be resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Unresolved {
    /// The image has no `/etc/passwd` to look the name up in.
    NoPasswd(String),
    /// The name is not in the image's `/etc/passwd`.
    UnknownUser(String),
}

/// `user` (with `gid` overriding its group) against the image's files (`None`: missing).
pub(super) fn resolve(
    user: &UserRef,
    gid: Option<u32>,
    passwd: Option<&str>,
    group: Option<&str>,
) -> Result<Resolved, Unresolved> {
    let entries = passwd.map(parse_passwd).unwrap_or_default();
    let by_uid = |uid: u32| entries.iter().find(|e| e.uid == uid);
    let (uid, primary, name) = match user {
        UserRef::Id(uid) => {
            let entry = by_uid(*uid);
            (*uid, entry.map_or(0, |e| e.gid), entry.map(|e| e.name.clone()))
        }
        UserRef::Name(name) => {
            if passwd.is_none() {
                return Err(Unresolved::NoPasswd(name.clone()));
            }
            let entry = entries
                .iter()
                .find(|e| e.name == *name)
                .ok_or_else(|| Unresolved::UnknownUser(name.clone()))?;
            (entry.uid, entry.gid, Some(name.clone()))
        }
    };
    let groups = match (name, group) {
        (Some(name), Some(group)) => parse_group(group)
            .into_iter()
            .filter(|g| g.name != name && g.members.contains(&name))
            .map(|g| g.gid)
            .collect(),
        _ => Vec::new(),
    };
    Ok(Resolved { uid, gid: gid.unwrap_or(primary), groups })
}

#[cfg(test)]
mod tests;
