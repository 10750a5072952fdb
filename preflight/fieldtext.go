package preflight

import "github.com/oslayer/oslayer/internal/field"

// naming is f naming the specification field n in its message.
func (f Finding) naming(n string) Finding {
	f.Field = n
	return f
}

// Text is the finding's message with the field it names spelled by spell
// (the CLI's flag, the PoolImage's spec.FIELD).
func (f Finding) Text(spell func(field.Name) string) string {
	return field.SpellText(f.Message, field.Name(f.Field), spell)
}

// fieldsOf are the fields the error findings name.
func fieldsOf(fs []Finding) []field.Name {
	var out []field.Name
	for _, f := range fs {
		if f.Severity == Error && f.Field != "" {
			out = append(out, field.Name(f.Field))
		}
	}
	return out
}

// Spell is the refusal with the fields its findings name spelled by spell.
func (e *RefusedError) Spell(spell func(field.Name) string) string {
	msg := e.msg
	for _, n := range e.fields {
		msg = field.SpellText(msg, n, spell)
	}
	return msg
}
