package main

import (
	"flag"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/quiverhq/quiver"
)

// Every command refuses a flag it does not take as a usage error (exit 2) with its usage, and
// names the flag meant when one is near (issue 35: `--dbb` got no hint).
func TestUnknownFlagIsAUsageErrorEverywhere(t *testing.T) {
	seen := 0
	for _, c := range commands {
		if c.hidden {
			continue
		}
		seen++
		args := append(strings.Fields(c.name), "--zz-typo")
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "", args...)
			if code != exitUsage || stdout != "" || !strings.Contains(stderr, "unknown flag --zz-typo\n") || !strings.Contains(stderr, "Usage:") {
				t.Errorf("exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
			}
		})
	}
	if seen < 12 {
		t.Fatalf("checked %d commands, want every one", seen)
	}
}

func TestUnknownFlagSuggestsTheClosest(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"threads", "list", "--dbb", "x.db"}, "unknown flag --dbb; did you mean --db?"},
		{[]string{"call", "get_current_time", "--arg", "{}"}, "unknown flag --arg; did you mean --args?"},
		{[]string{"run", "--agnet", "x", "hi"}, "unknown flag --agnet; did you mean --agent?"},       // two letters swapped
		{[]string{"serve", "--insecure"}, "unknown flag --insecure; did you mean --insecure-local?"}, // the start of one
		{[]string{"keys", "create", "--Name", "k"}, "unknown flag --Name; did you mean --name?"},
		{[]string{"vars", "set", "X", "--scret"}, "unknown flag --scret; did you mean --secret?"},
		{[]string{"tools", "schema", "x", "-dialet", "openai"}, "unknown flag --dialet; did you mean --dialect?"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, _, stderr := runCLI(t, "", tt.args...)
			if code != exitUsage || !strings.Contains(stderr, "quiver: "+tt.want+"\n") {
				t.Errorf("exit %d, stderr:\n%s\nwant %q", code, stderr, tt.want)
			}
		})
	}
}

// A flag far from every one the command takes is named without a guess, which would mislead.
func TestClosestFlag(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	for _, name := range []string{"db", "postgres", "json", "limit", "cursor", "thread"} {
		fs.Bool(name, false, "")
	}
	tests := []struct{ typed, want string }{
		{"db", "db"}, {"bd", "db"}, {"d", "db"}, {"dbb", "db"}, {"postgress", "postgres"}, {"postgre", "postgres"},
		{"jsno", "json"}, {"lmit", "limit"}, {"curser", "cursor"}, {"thr", "thread"}, {"threads", "thread"},
		{"verbose", ""}, {"x", ""}, {"zz-typo", ""}, {"agent", ""},
	}
	for _, tt := range tests {
		if got := closestFlag(fs, tt.typed); got != tt.want {
			t.Errorf("closestFlag(%q) = %q, want %q", tt.typed, got, tt.want)
		}
	}
}

// quiver version says which build it is from what Go recorded, whichever way it was built
// (issue 35: `(devel) (commit unknown)` after go install, with nothing to say why), after
// quiver.Version, the API document's info.version (issue 47); the build's own version only
// where it is not the release of quiver.Version.
func TestDescribeBuild(t *testing.T) {
	tail := runtime.Version() + ", " + runtime.GOOS + "/" + runtime.GOARCH + ")"
	vcs := func(rev, when, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.time", Value: when},
			{Key: "vcs.modified", Value: modified}}
	}
	build := func(version string, settings []debug.BuildSetting) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Path: "github.com/quiverhq/quiver", Version: version}, Settings: settings}
	}
	const rev = "70c1f24e807d78d6f6b0b133afe4717520c36a27"
	tests := []struct {
		name               string
		relVersion, relRev string
		bi                 *debug.BuildInfo
		want               string
	}{
		{"a release (-ldflags -X)", "v1.2.3", "0123456789abcdef0123", build("(devel)", vcs(rev, "2026-11-27T23:41:58Z", "true")),
			"quiver " + quiver.Version + " (build v1.2.3, commit 0123456789ab, " + tail},
		{"go install in a clean checkout", "", "", build("v0.0.0-20261127234158-70c1f24e807d", vcs(rev, "2026-11-27T23:41:58Z", "false")),
			"quiver " + quiver.Version + " (build v0.0.0-20261127234158-70c1f24e807d, commit 70c1f24e807d of 2026-11-27, " + tail},
		{"go install with local changes", "", "", build("v0.0.0-20261127234158-70c1f24e807d+dirty", vcs(rev, "2026-11-27T23:41:58Z", "true")),
			"quiver " + quiver.Version + " (build v0.0.0-20261127234158-70c1f24e807d+dirty, commit 70c1f24e807d of 2026-11-27 with local changes, " + tail},
		{"a checkout at a tag", "", "", build("v1.4.0", vcs(rev, "2026-11-27T23:41:58Z", "false")),
			"quiver " + quiver.Version + " (build v1.4.0, commit 70c1f24e807d of 2026-11-27, " + tail},
		{"go install module@v1.4.0", "", "", build("v1.4.0", nil), "quiver " + quiver.Version + " (build v1.4.0, " + tail},
		{"go install module@main: the pseudo-version names the commit", "", "", build("v0.0.0-20261127234158-70c1f24e807d", nil),
			"quiver " + quiver.Version + " (build v0.0.0-20261127234158-70c1f24e807d, commit 70c1f24e807d of 2026-11-27, " + tail},
		{"a pseudo-version after a tag", "", "", build("v1.4.1-0.20261127234158-70c1f24e807d", nil),
			"quiver " + quiver.Version + " (build v1.4.1-0.20261127234158-70c1f24e807d, commit 70c1f24e807d of 2026-11-27, " + tail},
		{"the release of this version", "v" + quiver.Version, "0123456789abcdef0123", build("(devel)", nil),
			"quiver " + quiver.Version + " (commit 0123456789ab, " + tail},
		{"go run, or -buildvcs=false", "", "", build("(devel)", nil),
			"quiver " + quiver.Version + " (commit not recorded: go run and -buildvcs=false leave it out; go build or go install in a git checkout records it, " + tail},
		{"no build information", "", "", nil,
			"quiver " + quiver.Version + " (commit not recorded: go run and -buildvcs=false leave it out; go build or go install in a git checkout records it, " + tail},
	}
	for _, tt := range tests {
		if got := describeBuild(tt.relVersion, tt.relRev, tt.bi); got != tt.want {
			t.Errorf("%s:\n got %q\nwant %q", tt.name, got, tt.want)
		}
	}
	if code, _, stderr := runCLI(t, "", "version", "extra"); code != exitUsage || !strings.Contains(stderr, `version takes no arguments, got "extra"`) {
		t.Errorf("version extra: exit %d\n%s", code, stderr)
	}
}
