// Command docgen writes the reference page generated from the code (see package
// internal/docgen): docs/reference/config.md.
//
//	go run ./internal/cmd/docgen            # from the repository's root
//	go run ./internal/cmd/docgen -root DIR  # from elsewhere
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/quiverhq/quiver/internal/docgen"
)

func main() {
	root := flag.String("root", ".", "the repository's root")
	flag.Parse()
	if err := docgen.Write(*root); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("wrote", filepath.Join(*root, "docs", "reference"))
}
