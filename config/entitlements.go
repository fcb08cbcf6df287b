package config

import (
	"errors"
	"fmt"

	"github.com/quiverhq/quiver/platform/connect"
	"github.com/quiverhq/quiver/platform/entitle"
	"github.com/quiverhq/quiver/platform/limits"
)

// checkEntitlements reports an entitlements block that does not check, naming the field as
// the file has it ("entitlements.rules[2].access"), so that a configuration with a rule that
// cannot be read is refused whole rather than applied in part. Names of tools and toolsets
// that do not exist are not errors: tools come and go (see entitle.Set.Warnings).
func (f *File) checkEntitlements() error {
	if f.Entitlements == nil {
		return nil
	}
	err := f.Entitlements.Check()
	var fe *entitle.FieldError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &fe):
		return &FieldError{Field: "entitlements." + fe.Field, Message: fe.Message}
	}
	return fmt.Errorf("entitlements: %w", err)
}

// checkLimits reports a limits block that does not check, naming the field as the file has
// it ("limits.limits[0].calls.per_minute").
func (f *File) checkLimits() error {
	if f.Limits == nil {
		return nil
	}
	err := f.Limits.Check()
	var fe *limits.FieldError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &fe):
		return &FieldError{Field: "limits." + fe.Field, Message: fe.Message}
	}
	return fmt.Errorf("limits: %w", err)
}

func (f *File) checkConnections() error {
	if f.Connections == nil {
		return nil
	}
	err := f.Connections.Check()
	var fe *connect.FieldError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &fe):
		return &FieldError{Field: "connections." + fe.Field, Message: fe.Message}
	}
	return fmt.Errorf("connections: %w", err)
}

// FieldError is a part of the file that does not check, named by its path in the file
// ("entitlements.rules[2].access").
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }
