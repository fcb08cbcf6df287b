package main

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

// serveProcess is the quiver binary serving in a process of its own, its standard error kept.
type serveProcess struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	exited chan error
}

// startServeProcess runs the built quiver serve on 127.0.0.1 with args, in a fresh data
// directory unless env names one, and waits until it has printed its banner or exited.
func startServeProcess(t *testing.T, env []string, args ...string) *serveProcess {
	t.Helper()
	cmd := exec.Command(quiverBinary(t), append([]string{"serve"}, args...)...)
	cmd.Env = append(childEnv(t.TempDir()), env...)
	p := &serveProcess{cmd: cmd, stderr: &syncBuffer{}, exited: make(chan error, 1)}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
		}
	})
	deadline := time.After(60 * time.Second)
	for !bannerEnd.MatchString(p.stderr.String()) {
		select {
		case err := <-p.exited:
			p.exited <- err
			return p
		case <-deadline:
			t.Fatalf("quiver serve printed no banner:\n%s", p.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return p
}

// bannerEnd matches the banner's last line, whichever it is.
var bannerEnd = regexp.MustCompile(`(ends this one\.|makes another|run_code included)\n`)

// stop interrupts the server, as Ctrl-C does, and returns what it printed once it exited.
func (p *serveProcess) stop(t *testing.T) string {
	t.Helper()
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := <-p.exited; err != nil {
		t.Fatalf("quiver serve exited with %v after an interrupt:\n%s", err, p.stderr.String())
	}
	return p.stderr.String()
}

// wait returns what the server printed once it exited by itself, and its exit code.
func (p *serveProcess) wait(t *testing.T) (int, string) {
	t.Helper()
	<-p.exited
	return p.cmd.ProcessState.ExitCode(), p.stderr.String()
}

// TestServeBanner: once it listens, quiver serve says where the console, MCP, the API, the
// health check and the database are, then (first start only) the admin key, all below the
// start-up's logs, which hold no routine line of River's. The banner is the README's sample,
// once the port, the path and the key are the README's. A later start says how to get a key
// instead, and with QUIVER_LOG_LEVEL=debug River's lines are there, at debug level.
func TestServeBanner(t *testing.T) {
	db := filepath.Join(t.TempDir(), "q.db")
	out := startServeProcess(t, nil, "--addr", "127.0.0.1:0", "--db", db).stop(t)

	serving := strings.Index(out, "quiver: serving MCP at ")
	m := regexp.MustCompile(`quiver: serving MCP at http://(127\.0\.0\.1:\d+)/mcp;`).FindStringSubmatch(out)
	if serving < 0 || m == nil {
		t.Fatalf("no banner:\n%s", out)
	}
	addr := m[1]
	for _, want := range []string{
		"  console  http://" + addr + "/\n",
		"  API      http://" + addr + "/v1 (its OpenAPI document: http://" + addr + "/v1/openapi.json)\n",
		"  health   http://" + addr + "/healthz\n",
		"  data     " + db + " (SQLite)\n",
	} {
		if !strings.Contains(out[serving:], want) {
			t.Errorf("the banner does not say %q:\n%s", want, out)
		}
	}
	keys := firstKeyRE.FindAllStringIndex(out, -1)
	if len(keys) != 1 || keys[0][0] < serving {
		t.Fatalf("want the key once, after the addresses; found it at %v:\n%s", keys, out)
	}
	// Before the banner, only the command's own lines ("created a new database").
	for line := range strings.Lines(out[:serving]) {
		if !strings.HasPrefix(line, "quiver: ") {
			t.Errorf("a line before the banner: %q", line)
		}
	}
	for _, river := range []string{"River client", "rivermigrate", "producer:", `msg="quiver: serving"`} {
		if strings.Contains(out, river) {
			t.Errorf("a routine line (%q) is logged at the default level:\n%s", river, out)
		}
	}

	// The README shows the same banner.
	end := strings.Index(out, "ends this one.\n") + len("ends this one.\n")
	banner := out[serving:end]
	keyID := regexp.MustCompile(`key_[0-9a-z]+`).FindString(banner)
	banner = strings.NewReplacer(addr, "127.0.0.1:7411", db, "/home/you/.local/share/quiver/quiver.db",
		keyID, "key_...", out[keys[0][0]:keys[0][1]], "qvk_...").Replace(banner)
	if sample := readmeSample(t, "quiver: serving MCP at"); sample != banner {
		t.Errorf("the README's sample of the banner:\n%s\nquiver serve prints (port, path and key replaced):\n%s", sample, banner)
	}

	out = startServeProcess(t, []string{logLevelEnv + "=debug"}, "--addr", "127.0.0.1:0", "--db", db).stop(t)
	if firstKeyRE.MatchString(out) || !strings.Contains(out, "  keys     the API keys made before (quiver keys list); quiver keys create --name NAME makes another\n") {
		t.Errorf("a later start shows a key, or not how to get one:\n%s", out)
	}
	if !regexp.MustCompile(`level=DEBUG msg="River client started"`).MatchString(out) {
		t.Errorf("QUIVER_LOG_LEVEL=debug does not show River's lines at debug level:\n%s", out)
	}
}

// readmeSample returns the README's text block starting with first.
func readmeSample(t *testing.T, first string) string {
	t.Helper()
	for _, block := range strings.Split(docPages(t), "```text\n")[1:] {
		if strings.HasPrefix(block, first) {
			return block[:strings.Index(block, "```")]
		}
	}
	t.Fatalf("the README has no text block starting %q", first)
	return ""
}

// TestServeCannotListenMakesNoKey: a start whose port is taken says so and makes no key, and the
// first start that listens makes and shows it; the key is never shown by a start that then
// exits.
func TestServeCannotListenMakesNoKey(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	db := filepath.Join(t.TempDir(), "q.db")
	code, out := startServeProcess(t, nil, "--addr", taken.Addr().String(), "--db", db).wait(t)
	for _, want := range []string{"quiver: listening on " + taken.Addr().String() + ": bind: address already in use",
		"is another quiver serve running?", "no API key was made: the first start that listens makes one and shows it"} {
		if !strings.Contains(out, want) {
			t.Errorf("the failure does not say %q", want)
		}
	}
	if code != exitError || firstKeyRE.MatchString(out) {
		t.Fatalf("exit %d; want %d and no key:\n%s", code, exitError, out)
	}

	out = startServeProcess(t, nil, "--addr", "127.0.0.1:0", "--db", db).stop(t)
	if !firstKeyRE.MatchString(out) || !strings.Contains(out, "shown this once") {
		t.Fatalf("the first start that listens shows no key:\n%s", out)
	}

	// Once keys exist, a failure to listen says they still work.
	code, out = startServeProcess(t, nil, "--addr", taken.Addr().String(), "--db", db).wait(t)
	if code != exitError || !strings.Contains(out, "the API keys made before stay valid") || firstKeyRE.MatchString(out) {
		t.Errorf("exit %d, want %d saying the keys stay valid:\n%s", code, exitError, out)
	}
}

// TestServeBannerSaysWhereTheDataIs on each backend: a SQLite file by its path, a PostgreSQL
// database by its host, port, name and user.
func TestServeBannerSaysWhereTheDataIs(t *testing.T) {
	for _, b := range serveBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			args := b.args(t)
			_, _, stderr := startServeWith(t, args...)
			out := stderr.String()
			want := "  data     " + args[1] + " (SQLite)\n"
			if args[0] == "--postgres" {
				want = "  data     " + describePostgres(args[1]) + "\n"
				if !strings.HasPrefix(describePostgres(args[1]), "PostgreSQL database ") {
					t.Errorf("PostgreSQL described as %q", describePostgres(args[1]))
				}
			}
			if !strings.Contains(out, want) {
				t.Errorf("the banner does not say %q:\n%s", want, out)
			}
		})
	}
}

// A PostgreSQL database is named by where it is and who connects, never with the password.
func TestDescribePostgres(t *testing.T) {
	for dsn, want := range map[string]string{
		"postgres://alice:s3cret@db.example.com:6543/quiver?sslmode=disable": "PostgreSQL database quiver on db.example.com:6543, as user alice",
		"host=/var/run/postgresql dbname=runs user=bob password=s3cret":      "PostgreSQL database runs on the socket in /var/run/postgresql, as user bob",
	} {
		if got := describePostgres(dsn); got != want {
			t.Errorf("describePostgres(%q) = %q, want %q", dsn, got, want)
		}
	}
}

// quietLibraries lowers a library's informational record to debug, keeps its warnings, and
// leaves Quiver's own records as they are.
func TestQuietLibraries(t *testing.T) {
	// A record logged by a library carries a pc in the library's code, as slog.Logger records
	// its caller: here a pc in package strings, whose Map calls the function that takes it.
	var library uintptr
	_ = strings.Map(func(r rune) rune {
		var pcs [1]uintptr
		runtime.Callers(2, pcs[:])
		library = pcs[0]
		return r
	}, "x")
	if f, _ := runtime.CallersFrames([]uintptr{library}).Next(); !strings.HasPrefix(f.Function, "strings.") {
		t.Fatalf("the pc taken is in %s, not in package strings", f.Function)
	}
	logAs := func(h slog.Handler, pc uintptr, level slog.Level, msg string) {
		if h.Enabled(context.Background(), level) {
			h.Handle(context.Background(), slog.NewRecord(time.Now(), level, msg, pc))
		}
	}
	var buf bytes.Buffer
	h := quietLibraries{slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})}
	logAs(h, library, slog.LevelInfo, "a library's routine line")
	logAs(h, library, slog.LevelWarn, "a library's warning")
	slog.New(h).Info("quiver: our own line")
	slog.New(h).Info(servingMessage, "addr", "127.0.0.1:1")
	out := buf.String()
	if strings.Contains(out, "routine line") || strings.Contains(out, servingMessage+`"`) ||
		!strings.Contains(out, `level=WARN msg="a library's warning"`) || !strings.Contains(out, `level=INFO msg="quiver: our own line"`) {
		t.Errorf("at info level:\n%s", out)
	}
	buf.Reset()
	h = quietLibraries{slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})}
	logAs(h.WithAttrs([]slog.Attr{slog.String("k", "v")}), library, slog.LevelInfo, "a library's routine line")
	if !strings.Contains(buf.String(), `level=DEBUG msg="a library's routine line" k=v`) {
		t.Errorf("at debug level:\n%s", buf.String())
	}
}

// QUIVER_LOG_LEVEL takes slog's level names; anything else stops the command, naming it.
func TestLogLevel(t *testing.T) {
	t.Setenv(logLevelEnv, "loud")
	code, _, stderr := runCLI(t, "", "serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "q.db"))
	if code != exitError || !strings.Contains(stderr, `QUIVER_LOG_LEVEL="loud": want debug, info, warn or error`) {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}
