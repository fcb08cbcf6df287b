package main

// The CLI reference, docs/reference/cli.md, is made from the commands table and each
// command's flags (see describe) by TestCLIReference, which fails when the committed page is
// not what the table makes.
//go:generate go test -run ^TestCLIReference$ . -args -update
