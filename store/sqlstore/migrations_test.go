package sqlstore

import (
	"strings"
	"testing"
	"testing/fstest"
)

// TestMigrations checks the embedded migrations: one list, every version for every database.
func TestMigrations(t *testing.T) {
	var versions []int
	for _, db := range Databases {
		ms, err := Migrations(db)
		if err != nil {
			t.Fatal(err)
		}
		if versions == nil {
			for _, m := range ms {
				versions = append(versions, m.Version)
			}
		}
		if len(ms) == 0 || len(ms) != len(versions) {
			t.Fatalf("%s: %d migrations, want %d", db, len(ms), len(versions))
		}
		for i, m := range ms {
			if m.Version != i+1 || m.Name == "" || !strings.HasSuffix(m.File, "."+db+".sql") || strings.TrimSpace(m.SQL) == "" {
				t.Fatalf("%s migration %d: %+v", db, i, m)
			}
		}
	}
	if _, err := Migrations("oracle"); err == nil {
		t.Error("migrations for an unknown database")
	}
}

// TestMigrationRules checks what the loader refuses.
func TestMigrationRules(t *testing.T) {
	x := &fstest.MapFile{Data: []byte("x")}
	pair := func(files ...string) fstest.MapFS {
		fsys := fstest.MapFS{}
		for _, f := range files {
			fsys["migrations/"+f+".sqlite.sql"] = x
			fsys["migrations/"+f+".postgres.sql"] = x
		}
		return fsys
	}
	for name, tc := range map[string]struct {
		fsys fstest.MapFS
		ok   bool
	}{
		"good":           {pair("0001_a", "0002_b"), true},
		"gap":            {pair("0001_a", "0003_c"), false},
		"repeat":         {pair("0001_a", "0001_b"), false},
		"short number":   {pair("0001_a", "002_b"), false},
		"no number":      {pair("init"), false},
		"zero":           {pair("0000_a"), false},
		"no name":        {pair("0001_"), false},
		"one database":   {fstest.MapFS{"migrations/0001_a.sqlite.sql": x}, false},
		"other names":    {fstest.MapFS{"migrations/0001_a.sqlite.sql": x, "migrations/0001_b.postgres.sql": x}, false},
		"no database":    {fstest.MapFS{"migrations/0001_a.sql": x}, false},
		"other database": {fstest.MapFS{"migrations/0001_a.sqlite.sql": x, "migrations/0001_a.postgres.sql": x, "migrations/0001_a.mysql.sql": x}, false},
	} {
		ms, err := loadMigrations(tc.fsys)
		if tc.ok && (err != nil || len(ms["sqlite"]) != 2 || len(ms["postgres"]) != 2) {
			t.Errorf("%s: %v, %v", name, ms, err)
		}
		if !tc.ok && err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
}
