package schema

// ConstAsEnum returns a copy of s in which every const is a one-value enum, typed "string"
// when the value is a string and s names no type. The two mean the same in JSON Schema; a
// provider that documents enum but not const (Gemini's responseJsonSchema) would otherwise
// be free to ignore the keyword, and the composed schema tells its calls apart by a const
// (_tool). A schema with both const and enum keeps both: rewriting it would change what it
// accepts. s itself is not changed.
func ConstAsEnum(s *Schema) *Schema {
	if s == nil {
		return nil
	}
	c := s.CloneSchemas()
	walk(c, func(x *Schema) {
		if x.Const == nil || x.Enum != nil {
			return
		}
		v := *x.Const
		x.Enum, x.Const = []any{v}, nil
		if _, ok := v.(string); ok && x.Type == "" && len(x.Types) == 0 {
			x.Type = "string"
		}
	})
	return c
}
