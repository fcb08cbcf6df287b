package store

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxNameLen is the longest workspace, thread or sub-agent instance name, in bytes.
const MaxNameLen = 128

// MaxToolNameLen is the longest tool or function name, in bytes: quiver.MaxNameBytes, a bound on
// hostile input. Tool names need not follow a convention (one that does not is warned
// about, not rejected); a provider that rejects one is offered it mapped.
const MaxToolNameLen = 512

// CheckName reports, wrapping ErrInvalid, a tool or function name that quiver.CheckName
// refuses too: empty or only whitespace, longer than MaxToolNameLen, not UTF-8, or holding
// control characters (Unicode Cc). Spaces, punctuation and any script are fine. what says
// what is named ("tool", "function").
func CheckName(what, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("a %s needs a name: %w", what, ErrInvalid)
	case len(name) > MaxToolNameLen:
		return fmt.Errorf("%s name is %d bytes long, over the bound of %d bytes: %w", what, len(name), MaxToolNameLen, ErrInvalid)
	case !utf8.ValidString(name):
		return fmt.Errorf("%s name %q is not UTF-8: %w", what, name, ErrInvalid)
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return fmt.Errorf("%s name %q holds a control character, which would forge log lines and prompt text: %w", what, name, ErrInvalid)
	case strings.TrimSpace(name) == "":
		return fmt.Errorf("%s name %q is only whitespace: %w", what, name, ErrInvalid)
	}
	return nil
}
