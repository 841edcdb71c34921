"""HTML views of sessions: the pages `sessionstore view` serves and the `report` file.

Server-rendered HTML with inline SVG charts and no framework: every page
works without JavaScript, which only adds table sorting and live reloading.
Everything shown comes from files an agent wrote, so it is data: every name
and content passes through `view.html.text` (control characters made visible,
then HTML-escaped). Sessions and record files are read only through the
store API and its storage seam (`Session.storage`), so a store on an object
store is viewed as a local one is.
"""
