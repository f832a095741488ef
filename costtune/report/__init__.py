"""Reading a run back for people: ``text`` builds the report and the comparison and prints
them (terminal, Markdown, JSON); ``html`` draws the interactive pages."""
