package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// version and commit are set by release builds (-ldflags "-X main.version=v1.2.3 -X
// main.commit=abc123"; see .goreleaser.yaml and the Dockerfile). A build from source leaves
// them empty, and versionText reads what the Go toolchain recorded instead.
var version, commit string

// versionText is the one line `quiver version` prints: the module version (a tag when
// installed with go install module@version, "(devel)" for a build in a checkout), the commit
// when known, and the toolchain and platform.
func versionText() string {
	v, c, dirty := version, commit, false
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if c == "" {
					c = s.Value
				}
			case "vcs.modified":
				dirty = commit == "" && s.Value == "true"
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	if len(c) > 12 {
		c = c[:12]
	}
	switch {
	case c == "":
		c = "commit unknown"
	case dirty:
		c = "commit " + c + " with local changes"
	default:
		c = "commit " + c
	}
	return fmt.Sprintf("quiver %s (%s, %s, %s/%s)", v, c, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
