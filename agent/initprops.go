package agent

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/quiverhq/quiver/schema"
)

// checkInitProperties reports an init_*_property that cannot work with the child's argument
// schema (its own args, or the default {message}), when the definition is read rather than
// on every call: a message property the schema does not declare would never be sent, and the
// call's whole arguments would silently become the child's first message instead. The
// attachments and name properties a schema does not declare are declared for it on the tool
// (see withProperty), so only one the schema declares with another type is refused. kind and
// child name the child ("prompt", "translate") and config the configuration
// ("prompt lead: subprompt translate").
func checkInitProperties(config, kind, child string, args *schema.Schema, msgProp, attProp, nameProp string) error {
	problem := ""
	if _, ok := args.Properties[msgProp]; msgProp != "" && !ok {
		problem = fmt.Sprintf("init_user_message_property %q is not an argument of %s %s, whose arguments are: %s; "+
			"name one of them, or declare %q in its args", msgProp, kind, child, argumentNames(args), msgProp)
	}
	problem = cmp.Or(problem, sharedInitProperty(kind, child, msgProp, attProp, nameProp),
		initPropertyTypes(kind, child, args.Properties, attProp, nameProp))
	if problem != "" {
		return fmt.Errorf("%w: %s: %s", ErrDefinition, config, problem)
	}
	return nil
}

// sharedInitProperty says which two init_*_property name the same argument; "" when none do.
func sharedInitProperty(kind, child, msgProp, attProp, nameProp string) string {
	roles := map[string]string{}
	for _, r := range []struct{ key, prop string }{
		{"init_user_message_property", msgProp}, {"init_attachments_property", attProp}, {"init_agent_name_property", nameProp},
	} {
		if r.prop == "" {
			continue
		}
		if other, dup := roles[r.prop]; dup {
			return fmt.Sprintf("%s and %s both name the argument %q of %s %s: each needs an argument of its own", other, r.key, r.prop, kind, child)
		}
		roles[r.prop] = r.key
	}
	return ""
}

// initPropertyTypes says which of the attachments and name properties the schema declares with
// a type it cannot have; "" when neither.
func initPropertyTypes(kind, child string, props map[string]*schema.Schema, attProp, nameProp string) string {
	if s, ok := props[attProp]; ok && attProp != "" && !admits(s, "array") {
		return fmt.Sprintf("init_attachments_property %q is an argument of %s %s that is not an array (of paths under /attachments/); "+
			"declare it as an array of strings, or leave it out of the args and it is declared for you", attProp, kind, child)
	}
	if s, ok := props[nameProp]; ok && nameProp != "" && !admits(s, "string") {
		return fmt.Sprintf("init_agent_name_property %q is an argument of %s %s that is not a string; declare it as a string, "+
			"or leave it out of the args and it is declared for you", nameProp, kind, child)
	}
	return ""
}

// admits reports whether s allows values of JSON type typ (a schema that names no type allows
// any).
func admits(s *schema.Schema, typ string) bool {
	if s == nil || (s.Type == "" && len(s.Types) == 0) {
		return true
	}
	return s.Type == typ || slices.Contains(s.Types, typ)
}

func argumentNames(s *schema.Schema) string {
	if len(s.Properties) == 0 {
		return "none"
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// checkInit reports what is wrong with the init_*_property that prompt parent configures for
// calling prompt p.
func (s *Subprompt) checkInit(parent string, p *Prompt) error {
	return checkInitProperties("prompt "+parent+": subprompt "+s.Name, "prompt", p.Name, argsOf(p), s.InitUserMessageProperty, s.InitAttachmentsProperty, "")
}

// checkInit reports what is wrong with the init_*_property that prompt parent configures for
// calling agent a.
func (s *Subagent) checkInit(parent string, a *Agent) error {
	if a.Prompt == nil {
		return nil // reported where the agent is checked
	}
	return checkInitProperties("prompt "+parent+": subagent "+s.Name, "agent", a.Name, argsOf(a.Prompt), s.InitUserMessageProperty, s.InitAttachmentsProperty,
		s.InitAgentNameProperty)
}
