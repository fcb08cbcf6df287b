// Command openapi prints the /v1 API's OpenAPI 3.1 document, as quiver serve serves it at
// /v1/openapi.json, for .ci/run to check with an independent validator:
//
//	go run ./internal/cmd/openapi > openapi.json
package main

import (
	"fmt"
	"os"

	"github.com/quiverhq/quiver/server"
)

func main() {
	doc, err := server.OpenAPI()
	if err != nil {
		fmt.Fprintln(os.Stderr, "openapi:", err)
		os.Exit(1)
	}
	os.Stdout.Write(append(doc, '\n'))
}
