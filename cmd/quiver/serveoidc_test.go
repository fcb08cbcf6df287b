package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quiverhq/quiver/config"

	"github.com/quiverhq/quiver/store"
	"github.com/quiverhq/quiver/store/memstore"
)

// quiver serve's --oidc flags refuse what cannot work, with exit 2 and the reason.
func TestServeOIDCFlagsRefused(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	unknown := write("unknown.yaml", "rules:\n  - {claim: groups, value: eng, workspace: wsp_nowhere, role: member}\n")
	badRole := write("badrole.yaml", "rules:\n  - {claim: groups, value: eng, workspace: wsp_x, role: owner}\n")
	badField := write("badfield.yaml", "rules:\n  - {claim: groups, value: eng, workspace: wsp_x, role: member, grant: all}\n")
	fileRules := write("quiver.yaml", "oidc:\n  issuer: https://id.example.com/\n  console_client_id: quiver-console\n"+
		"  rules:\n    - {claim: groups, value: eng, workspace: wsp_from_file, role: viewer}\n")
	fileNoRules := write("norules.yaml", "oidc:\n  issuer: https://id.example.com/\n")
	db := filepath.Join(dir, "q.db")
	tests := []struct {
		name  string
		flags []string
		says  string
	}{
		{"rules without an issuer", []string{"--oidc-rules", unknown}, "need --oidc-issuer"},
		{"at+jwt required without an issuer", []string{"--oidc-require-at-jwt"}, "need --oidc-issuer"},
		{"an issuer without rules", []string{"--oidc-issuer", "https://id.example.com"}, "needs --oidc-rules"},
		{"with --insecure-local", []string{"--insecure-local", "--oidc-issuer", "https://id.example.com", "--oidc-rules", unknown}, "give one of them"},
		{"an http issuer off loopback", []string{"--oidc-issuer", "http://id.example.com", "--oidc-rules", unknown}, "not an https URL"},
		{"a workspace the database lacks", []string{"--oidc-issuer", "https://id.example.com", "--oidc-rules", unknown}, `names workspace "wsp_nowhere"`},
		{"an unknown role", []string{"--oidc-issuer", "https://id.example.com", "--oidc-rules", badRole}, `role "owner"`},
		{"an unknown field", []string{"--oidc-issuer", "https://id.example.com", "--oidc-rules", badField}, "grant"},
		{"a missing file", []string{"--oidc-issuer", "https://id.example.com", "--oidc-rules", filepath.Join(dir, "none.yaml")}, "no such file"},
		{"the configuration's oidc block is read", []string{"--config", fileRules}, `the configuration's oidc block: rule 1 names workspace "wsp_from_file"`},
		{"a flag wins over the block", []string{"--config", fileRules, "--oidc-rules", unknown}, `names workspace "wsp_nowhere"`},
		{"a block without rules", []string{"--config", fileNoRules}, "needs --oidc-rules FILE (or rules in the configuration's oidc block)"},
		{"a block with --insecure-local", []string{"--config", fileRules, "--insecure-local"}, "give one of them"},
		{"a console parameter without a value sign", []string{"--oidc-issuer", "https://id.example.com", "--oidc-rules", unknown, "--oidc-console-param", "audience"}, "is not NAME=VALUE"},
		{"a console parameter of the sign-in's own", []string{"--oidc-issuer", "https://id.example.com", "--oidc-rules", unknown, "--oidc-console-param", "state=x"}, "the sign-in's own"},
		{"all interfaces without a public URL", []string{"--addr", "0.0.0.0:0", "--oidc-issuer", "https://id.example.com", "--oidc-rules", unknown}, "needs --public-url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"serve", "--db", db, "--addr", "127.0.0.1:0"}, tt.flags...)
			code, _, stderr := runCLI(t, "", args...)
			if code != exitUsage || !strings.Contains(stderr, tt.says) {
				t.Fatalf("exit %d, want %d saying %q:\n%s", code, exitUsage, tt.says, stderr)
			}
		})
	}
}

// --oidc-require-at-jwt, or require_at_jwt in the configuration's oidc block, makes the check
// refuse tokens not typed at+jwt; neither leaves it off.
func TestServeOIDCRequireATJWT(t *testing.T) {
	ctx := context.Background()
	db := memstore.New()
	t.Cleanup(func() { db.Close() })
	ws := &store.Workspace{Name: "a"}
	if err := db.CreateWorkspace(ctx, ws); err != nil {
		t.Fatal(err)
	}
	block := func(require bool) *config.File {
		f, err := config.Parse(strings.NewReader(fmt.Sprintf("oidc:\n  issuer: https://id.example.com/\n  require_at_jwt: %v\n"+
			"  rules:\n    - {claim: groups, value: eng, workspace: %s, role: member}\n", require, ws.ID)), "quiver.yaml")
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	tests := []struct {
		name    string
		flags   []string
		file    *config.File
		require bool
	}{
		{"neither", nil, block(false), false},
		{"the flag", []string{"--oidc-require-at-jwt"}, block(false), true},
		{"the block", nil, block(true), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("serve", flag.ContinueOnError)
			f := addOIDCFlags(fs)
			if err := fs.Parse(tt.flags); err != nil {
				t.Fatal(err)
			}
			ta, err := f.tokenAuth(ctx, db, "https://quiver.example.com", false, tt.file)
			if err != nil || ta == nil || ta.RequireATJWT != tt.require {
				t.Fatalf("%+v %v, want RequireATJWT %v", ta, err, tt.require)
			}
		})
	}
}
