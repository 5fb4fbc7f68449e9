package record

// Counter is the value of one of the framework's counters (CounterName):
// the last value issued. A counter key that does not exist means nothing was
// issued yet (see package mesh/gen for the issuance rule). The format is project-specific.
type Counter struct {
	Value Generation
}

func (c *Counter) validate() error {
	v := &val{kind: KindCounter}
	v.gen("value", c.Value)
	return v.err
}

// Validate checks the value range.
func (c Counter) Validate() error { return c.validate() }

// Encode returns the canonical JSON value {"recordVersion":1,"value":"N"}.
func (c Counter) Encode() ([]byte, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	root := jObjV(
		mem("recordVersion", jUintV(RecordVersion)),
		mem("value", jDecStrV(uint64(c.Value))),
	)
	return finish(KindCounter, encodeCanonical(root))
}

// DecodeCounter reads a counter value.
func DecodeCounter(value []byte) (Counter, error) {
	d, o, err := begin(KindCounter, value)
	if err != nil {
		return Counter{}, err
	}
	defer d.release()
	c := Counter{Value: o.gen("value")}
	o.end()
	if d.err != nil {
		return Counter{}, d.err
	}
	if err := c.validate(); err != nil {
		return Counter{}, err
	}
	return c, nil
}
