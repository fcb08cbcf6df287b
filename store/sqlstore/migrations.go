package sqlstore

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// The schema's migrations are one list of versions for both databases: the files
// migrations/NNNN_name.sqlite.sql and migrations/NNNN_name.postgres.sql, side by side, one of
// each for every version. Each backend applies its own in order and records the versions it
// applied in its schema_migrations table; a database knows its version by number only, so a
// migration's name may change without touching the databases it was applied to.

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Databases are the names of the databases the migrations are written for, as in their file
// names and Dialect.Name.
var Databases = []string{"sqlite", "postgres"}

// A Migration is one numbered step of the schema, in one database's SQL.
type Migration struct {
	Version int
	Name    string // what it does: "threads_messages"
	File    string // its file: "0001_threads_messages.sqlite.sql"
	SQL     string
}

// Migrations returns the steps of the schema for database ("sqlite" or "postgres"), in order:
// versions 1, 2, 3... without gaps.
func Migrations(database string) ([]Migration, error) {
	all, err := loadMigrations(migrationFiles)
	if err != nil {
		return nil, err
	}
	ms, ok := all[database]
	if !ok {
		return nil, fmt.Errorf("sqlstore: no migrations for database %q", database)
	}
	return ms, nil
}

// loadMigrations reads every database's migrations from fsys and checks that they are one list:
// each version 1, 2, 3... once, with the same name, for every database.
func loadMigrations(fsys fs.FS) (map[string][]Migration, error) {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	byVersion := map[int]map[string]Migration{}
	for _, name := range names {
		m, database, err := readMigration(fsys, name)
		if err != nil {
			return nil, err
		}
		if byVersion[m.Version] == nil {
			byVersion[m.Version] = map[string]Migration{}
		}
		if other, ok := byVersion[m.Version][database]; ok {
			return nil, fmt.Errorf("sqlstore: migrations %s and %s have the same version", other.File, m.File)
		}
		byVersion[m.Version][database] = m
	}
	return orderMigrations(byVersion)
}

// readMigration reads the migration in the file at name, and says which database it is for.
func readMigration(fsys fs.FS, name string) (Migration, string, error) {
	file := path.Base(name)
	version, what, database, ok := parseMigrationFile(file)
	if !ok {
		return Migration{}, "", fmt.Errorf("sqlstore: migration %s: want a name like 0001_what.sqlite.sql or 0001_what.postgres.sql", file)
	}
	sql, err := fs.ReadFile(fsys, name)
	if err != nil {
		return Migration{}, "", err
	}
	return Migration{Version: version, Name: what, File: file, SQL: string(sql)}, database, nil
}

// parseMigrationFile reads a migration's file name, 0001_what.sqlite.sql; false when it is not
// one.
func parseMigrationFile(file string) (version int, what, database string, ok bool) {
	stem, database, ok := strings.Cut(strings.TrimSuffix(file, ".sql"), ".")
	num, what, ok2 := strings.Cut(stem, "_")
	version, err := strconv.Atoi(num)
	ok = ok && ok2 && err == nil && len(num) == 4 && version > 0 && what != "" && slices.Contains(Databases, database)
	return version, what, database, ok
}

// orderMigrations lists each database's migrations in order, checking that the versions run
// without gaps and that each is written for every database.
func orderMigrations(byVersion map[int]map[string]Migration) (map[string][]Migration, error) {
	out := map[string][]Migration{}
	for v := 1; v <= len(byVersion); v++ {
		ms, ok := byVersion[v]
		if !ok {
			return nil, fmt.Errorf("sqlstore: no migration %04d: versions must run 1, 2, 3... without gaps", v)
		}
		if err := checkStep(v, ms); err != nil {
			return nil, err
		}
		for _, db := range Databases {
			out[db] = append(out[db], ms[db])
		}
	}
	return out, nil
}

// checkStep checks that step v of the schema is written for every database, under one name.
func checkStep(v int, ms map[string]Migration) error {
	first := ms[Databases[0]]
	for _, db := range Databases {
		m, ok := ms[db]
		if !ok {
			return fmt.Errorf("sqlstore: migration %04d has no %s version: every step of the schema is written for every database", v, db)
		}
		if m.Name != first.Name {
			return fmt.Errorf("sqlstore: migration %04d is %q for %s and %q for %s: one step, one name", v, first.Name, Databases[0], m.Name, db)
		}
	}
	return nil
}
