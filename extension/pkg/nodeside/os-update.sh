#!/bin/sh
# os-update [--retry] [--stage] IMAGE [VERSION]
#
# Switches this node to the pool image IMAGE (a reference by digest,
# REGISTRY/REPOSITORY@sha256:HEX) and reboots into it: `bootc switch
# --apply --enforce-container-sigpolicy IMAGE` where bootc exists, else `rpm-ostree rebase
# ostree-image-signed:docker://IMAGE` and `systemctl reboot`; when IMAGE
# is staged already, only the reboot. The signature is checked by the
# node's /etc/containers/policy.json. VERSION (the operating system
# version the image carries in /etc/os-release PRETTY_NAME) is only
# reported.
#
# gardener-node-agent runs this as status.inPlaceUpdates.osUpdate and reads
# its output: "network problems" is retried, "invalid arguments" and
# "system failure" are not. Exit codes: 0 switched (or already running
# IMAGE), 64 invalid arguments, 70 system failure, 75 network problems.
#
# --stage (the staging unit) stages IMAGE for the next boot and does not
# reboot: `bootc switch --enforce-container-sigpolicy IMAGE` or `rpm-ostree rebase`; nothing when the
# node runs IMAGE or has it staged, or when bootc-fetch-apply-updates.timer
# is enabled (it would reboot into the staged image without a drain).
#
# --retry (the pivot of a new machine, the staging unit) runs it again
# after network problems, every $OS_UPDATE_RETRY_SECONDS (default 15)
# seconds, until it succeeds or fails otherwise.
#
# One run at a time: each holds the lock $OS_UPDATE_LOCK (default
# /run/oslayer/os-update.lock) while it switches, so an update waits for a
# staging under way and then finds IMAGE staged.
set -u

me=os-update

fail() {
	# fail CODE CLASS MESSAGE
	echo "$me: $2: $3" >&2
	exit "$1"
}
invalid() { fail 64 "invalid arguments" "$1"; }
system() { fail 70 "system failure" "$1"; }
network() { fail 75 "network problems" "$1"; }

# digest_of IMAGE prints IMAGE's sha256:HEX or fails with invalid arguments.
digest_of() {
	case $1 in
	*@sha256:*) ;;
	*) invalid "image $1 is not a reference by digest (NAME@sha256:HEX)" ;;
	esac
	hex=${1##*@sha256:}
	case $hex in
	*[!0-9a-f]*) invalid "image $1: the digest is not lower-case hex" ;;
	esac
	[ ${#hex} -eq 64 ] || invalid "image $1: the digest has ${#hex} hex digits, not 64"
	valid_ref "$1" || invalid "image $1 is not a valid image reference (REGISTRY/REPOSITORY@sha256:HEX; the repository in lower case, starting with a letter or digit)"
	echo "sha256:$hex"
}

# valid_ref REF: REF is a reference containers/image parses (bootc and
# rpm-ostree hand "docker://REF" to it): its ParseNormalizedNamed
# (go.podman.io/image/v5 docker/reference/normalize.go: splitDockerDomain,
# the lower-case check; reference.go Parse: ReferenceRegexp of
# regexp.go, at most 255 characters of name), by digest. Anything else,
# a name starting with "-" above all, never reaches bootc's command line.
valid_ref() {
	case $1 in
	*[!A-Za-z0-9._:/@-]*) return 1 ;;
	esac
	first=${1%%/*}
	case $first in
	"$1" | localhost | *[.:]*) ;;
	*) first= ;;
	esac
	if [ "$first" = "$1" ] || [ -z "$first" ]; then
		dom=docker.io rest=$1
	else
		dom=$first rest=${1#*/}
	fi
	[ "$dom" != index.docker.io ] || dom=docker.io
	if [ "$dom" = docker.io ]; then
		case $rest in
		*/*) ;;
		*) rest=library/$rest ;;
		esac
	fi
	remote=${rest%%:*}
	[ "$remote" = "$(printf '%s' "$remote" | LC_ALL=C tr A-Z a-z)" ] || return 1
	ref=$dom/$rest
	dc='([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])'
	nc='[a-z0-9]+(([._]|__|-*)[a-z0-9]+)*'
	printf '%s' "$ref" | LC_ALL=C grep -Eq "^($dc(\\.$dc)*(:[0-9]+)?/)?$nc(/$nc)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?@sha256:[0-9a-f]{64}\$" || return 1
	n=${ref%@*}
	t=${n##*:}
	case $t in
	*/*) ;;
	*) n=${n%:*} ;;
	esac
	[ ${#n} -le 255 ]
}

# lock waits for the lock of one run at a time (without flock, none).
lock() {
	command -v flock >/dev/null 2>&1 || return 0
	l=${OS_UPDATE_LOCK:-/run/oslayer/os-update.lock}
	mkdir -p "$(dirname "$l")" && (: >>"$l") 2>/dev/null || system "cannot open the lock $l"
	exec 9>>"$l"
	flock 9 || system "cannot take the lock $l"
}

# compact prints its standard input without white space.
compact() { tr -d ' \t\r\n'; }

# bootc_has KEY DIGEST STATUS: in bootc's STATUS (`bootc status --json`
# compacted), the KEY deployment ("booted" or "staged") runs DIGEST.
bootc_has() {
	b=${3#*\"$1\":}
	[ "$b" != "$3" ] || return 1
	b=${b%%\"rollback\":*}
	[ "$1" = booted ] || b=${b%%\"booted\":*}
	case $b in
	*"\"imageDigest\":\"$2\""*) return 0 ;;
	esac
	return 1
}

# rpmostree_has KEY IMAGE DIGEST STATUS: in rpm-ostree's STATUS
# (`rpm-ostree status --json` compacted), the KEY deployment ("booted" or
# "staged") runs IMAGE (a deployment object of "deployments" with
# "KEY":true and the digest or the reference).
rpmostree_has() {
	printf '%s\n' "$4" | awk \
		-v key="\"$1\":true" \
		-v d="\"container-image-reference-digest\":\"$3\"" \
		-v r="\"container-image-reference\":\"ostree-image-signed:docker://$2\"" '
	{ s = s $0 }
	END {
		i = index(s, "\"deployments\":[")
		if (i == 0) exit 1
		s = substr(s, i + 15)
		depth = 0; obj = ""; found = 0
		for (k = 1; k <= length(s); k++) {
			c = substr(s, k, 1)
			if (c == "{") depth++
			if (depth > 0) obj = obj c
			if (c == "}" && --depth == 0) {
				if (index(obj, key) && (index(obj, d) || index(obj, r))) found = 1
				obj = ""
			}
			if (depth == 0 && c == "]") break
		}
		exit !found
	}'
}

# classify OUTPUT WHAT fails with the class of a failed switch.
classify() {
	last=$(printf '%s\n' "$1" | grep -v '^[[:space:]]*$' | tail -n 1)
	if printf '%s\n' "$1" | grep -Eqi 'connection refused|connection reset|dial tcp|i/o timeout|tls handshake timeout|no such host|temporary failure in name resolution|network is unreachable|no route to host|timeout exceeded|unexpected eof|502 bad gateway|503 service unavailable|504 gateway|429 too many requests|toomanyrequests'; then
		network "$2: $last"
	fi
	if printf '%s\n' "$1" | grep -Eqi 'manifest unknown|name unknown|invalid reference format'; then
		invalid "$2: $last"
	fi
	system "$2: $last"
}

# run WHAT CMD... runs CMD, its output to stderr, and classifies a failure.
# The output is kept in a variable, not a temporary file: every failed
# attempt of --retry would leave one behind in the node's /tmp.
run() {
	what=$1
	shift
	out=$("$@" 2>&1)
	rc=$?
	[ -z "$out" ] || printf '%s\n' "$out" >&2
	if [ $rc -ne 0 ]; then
		classify "$out" "$what failed (exit $rc)"
	fi
}

if [ "${1:-}" = --retry ]; then
	shift
	while :; do
		"$0" "$@" && exit 0
		rc=$?
		[ $rc -eq 75 ] || exit $rc
		echo "$me: retrying in ${OS_UPDATE_RETRY_SECONDS:-15} s" >&2
		sleep "${OS_UPDATE_RETRY_SECONDS:-15}"
	done
fi
stage=
if [ "${1:-}" = --stage ]; then
	stage=1
	shift
fi

[ $# -ge 1 ] && [ $# -le 2 ] || invalid "usage: $me [--retry] [--stage] IMAGE@sha256:HEX [VERSION]"
image=$1
version=${2:-}
digest=$(digest_of "$image") || exit $?
what="$image${version:+ ($version)}"
lock

# auto_apply: --stage must not stage: bootc-fetch-apply-updates.timer
# (enabled on bootc base images) runs `bootc upgrade --apply`, which
# reboots into any staged deployment, without a drain.
auto_apply() {
	[ -n "$stage" ] || return 1
	systemctl is-enabled --quiet bootc-fetch-apply-updates.timer 2>/dev/null || return 1
	echo "$me: not staging $what: bootc-fetch-apply-updates.timer is enabled and would reboot the node into it without a drain; the node moves at its next in-place update"
}

# staged: IMAGE is staged already; an update reboots into it.
staged() {
	if [ -n "$stage" ]; then
		echo "$me: $what is staged already"
	else
		echo "$me: $what is staged already; rebooting into it"
		run "systemctl reboot" systemctl reboot
	fi
}

if command -v bootc >/dev/null 2>&1; then
	st=$(bootc status --json 2>/dev/null | compact)
	if bootc_has booted "$digest" "$st"; then
		echo "$me: the node already runs $what"
	elif bootc_has staged "$digest" "$st"; then
		staged
	elif auto_apply; then
		:
	elif [ -n "$stage" ]; then
		echo "$me: staging $what for the next boot with bootc"
		run "bootc switch" bootc switch --enforce-container-sigpolicy "$image"
	else
		echo "$me: switching to $what with bootc"
		run "bootc switch" bootc switch --apply --enforce-container-sigpolicy "$image"
	fi
	exit 0
fi
if command -v rpm-ostree >/dev/null 2>&1; then
	st=$(rpm-ostree status --json 2>/dev/null | compact)
	if rpmostree_has booted "$image" "$digest" "$st"; then
		echo "$me: the node already runs $what"
		exit 0
	fi
	if rpmostree_has staged "$image" "$digest" "$st"; then
		staged
	elif auto_apply; then
		:
	elif [ -n "$stage" ]; then
		echo "$me: staging $what for the next boot with rpm-ostree"
		run "rpm-ostree rebase" rpm-ostree rebase "ostree-image-signed:docker://$image"
	else
		echo "$me: rebasing onto $what with rpm-ostree"
		run "rpm-ostree rebase" rpm-ostree rebase "ostree-image-signed:docker://$image"
		run "systemctl reboot" systemctl reboot
	fi
	exit 0
fi
system "neither bootc nor rpm-ostree is installed"
