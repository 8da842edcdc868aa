module github.com/ompd-inspect/ompd-inspect

go 1.26.8
