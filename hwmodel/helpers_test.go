package hwmodel

import "reflect"

func reflectValue(c *Config) reflect.Value { return reflect.ValueOf(c).Elem() }
