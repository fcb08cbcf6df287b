package docgen

import (
	"os"
	"path/filepath"
)

// Pages are the generated pages, by their path from the repository's root, and what makes
// each.
var Pages = map[string]func(root string) (string, error){
	"docs/reference/config.md": Config,
}

// Write writes every generated page under root.
func Write(root string) error {
	for page, make := range Pages {
		text, err := make(root)
		if err != nil {
			return err
		}
		path := filepath.Join(root, filepath.FromSlash(page))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			return err
		}
	}
	return nil
}
