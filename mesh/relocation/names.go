package relocation

import "fmt"

// enumName is the String of the package's enums: names[v], or "typ(v)" for
// a value without a name — past the end of the table, or an empty entry
// (events and actions start at 1, so their zero is unnamed).
func enumName[T ~uint8](v T, names []string, typ string) string {
	if int(v) < len(names) && names[v] != "" {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", typ, uint8(v))
}
