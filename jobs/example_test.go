package jobs_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/quiverhq/quiver"
	"github.com/quiverhq/quiver/agent"
	"github.com/quiverhq/quiver/jobs"
	"github.com/quiverhq/quiver/model/scripted"
	"github.com/quiverhq/quiver/store/sqlite"
	"github.com/quiverhq/quiver/thread"
	_ "github.com/quiverhq/quiver/tools/clock"
)

// A run queued in the background, on the SQLite database the store uses, with a scripted
// model that calls a tool and answers.
func ExampleStartSQLite() {
	dir, _ := os.MkdirTemp("", "jobs-example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "quiver.db")
	st, err := sqlite.Open(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	m, err := scripted.Parse("demo", []byte("turns:\n  - calls: [{name: get_current_time, args: {timezone: UTC}}]\n  - text: It is daytime.\n"))
	if err != nil {
		fmt.Println(err)
		return
	}
	helper := &agent.Agent{Name: "helper", Prompt: &agent.Prompt{Name: "helper", Tools: []string{"get_current_time"}}}
	j, err := jobs.StartSQLite(context.Background(), path, jobs.Config{
		Runner: &agent.Runner{Store: st, Registry: quiver.Default, Model: m},
		Agents: func(context.Context, string) (*agent.Agent, error) { return helper, nil },
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer j.Stop(context.Background())
	th, _ := thread.Create(context.Background(), st, thread.Options{WorkspaceID: "wsp_demo"})
	id, err := j.Start(context.Background(), jobs.RunArgs{WorkspaceID: "wsp_demo", ThreadID: th.ID(), Agent: "helper",
		Message: "Is it day or night?"})
	if err != nil {
		fmt.Println(err)
		return
	}
	for status, _ := j.RunStatus(context.Background(), "wsp_demo", th.ID(), id); status != jobs.RunDone; status, _ = j.RunStatus(context.Background(), "wsp_demo", th.ID(), id) {
		time.Sleep(10 * time.Millisecond)
	}
	hist, _ := th.History(context.Background())
	fmt.Println(hist[len(hist)-1].Content)
	// Output: It is daytime.
}
