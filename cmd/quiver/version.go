package main

import (
	"cmp"
	"fmt"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/quiverhq/quiver"
)

// version and commit are set by release builds (-ldflags "-X main.version=v1.2.3 -X
// main.commit=abc123"; see .goreleaser.yaml and the Dockerfile). A build from source leaves
// them empty, and describeBuild reads what the Go toolchain recorded instead.
var version, commit string

// versionText is the one line `quiver version` prints, from the release build's values and
// what the Go toolchain recorded in the binary.
func versionText() string {
	bi, _ := debug.ReadBuildInfo() // nil without build information: nothing recorded
	return describeBuild(version, commit, bi)
}

// describeBuild says which quiver this is: its version (quiver.Version, which the API's
// OpenAPI document gives as its info.version too); the build's own version when it is not the
// release of that version ("v" + quiver.Version): a pseudo-version for a build in a git
// checkout (which Go derives from the commit), the tag or pseudo-version go install
// module@version fetched; the commit, its date and whether the checkout had local changes
// (vcs.revision, vcs.time, vcs.modified, else what a pseudo-version holds); and the toolchain
// and platform. relVersion and relCommit are a release build's -ldflags, and win over bi.
func describeBuild(relVersion, relCommit string, bi *debug.BuildInfo) string {
	v, rev, when, dirty := relVersion, relCommit, "", false
	if bi != nil {
		if v == "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		var recorded string
		recorded, when, dirty = vcsOf(bi)
		rev = cmp.Or(rev, recorded)
	}
	if relCommit != "" {
		// The release's commit: the checkout's time and changes, if any, are not its.
		when, dirty = "", false
	}
	if rev == "" {
		// A module fetched at a commit (go install module@main) has no VCS settings, but its
		// pseudo-version names the commit and its time.
		rev, when = fromPseudoVersion(v)
		dirty = strings.HasSuffix(v, "+dirty")
	}
	var parts []string
	if v != "" && v != "v"+quiver.Version {
		parts = append(parts, "build "+v)
	}
	switch {
	case rev != "":
		c := "commit " + rev[:min(len(rev), 12)]
		if t, err := time.Parse(time.RFC3339, when); err == nil {
			c += " of " + t.UTC().Format(time.DateOnly)
		}
		if dirty {
			c += " with local changes"
		}
		parts = append(parts, c)
	case v == "":
		// Built from source without version control data: go run, -buildvcs=false (in GOFLAGS
		// too), or a copy of the source outside a git checkout.
		parts = append(parts, "commit not recorded: go run and -buildvcs=false leave it out; go build or go install in a git checkout records it")
	}
	parts = append(parts, runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH)
	return fmt.Sprintf("quiver %s (%s)", quiver.Version, strings.Join(parts, ", "))
}

// pseudoVersion matches the end of a Go pseudo-version (vX.Y.Z-[pre.]0.yyyymmddhhmmss-abcdefabcdef,
// or vX.0.0-yyyymmddhhmmss-abcdefabcdef): its UTC time and the commit's first 12 hex digits.
var pseudoVersion = regexp.MustCompile(`(?:^v[0-9]+\.[0-9]+\.[0-9]+-|\.)(\d{14})-([0-9a-f]{12})(?:\+[0-9A-Za-z.-]+)?$`)

// fromPseudoVersion returns the commit and time (RFC 3339) a pseudo-version names; "" for a
// version that is not one.
func fromPseudoVersion(v string) (rev, when string) {
	m := pseudoVersion.FindStringSubmatch(v)
	if m == nil {
		return "", ""
	}
	t, err := time.Parse("20060102150405", m[1])
	if err != nil {
		return m[2], ""
	}
	return m[2], t.Format(time.RFC3339)
}

// vcsOf returns what the toolchain recorded of the checkout bi was built in: the commit, its
// time (RFC 3339) and whether it had local changes; "" and false for what it did not record.
func vcsOf(bi *debug.BuildInfo) (rev, when string, dirty bool) {
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	return rev, when, dirty
}
