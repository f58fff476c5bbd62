module github.com/anna-search/anna

go 1.26
