extension ConsoleAssets {
    /// The console's style (written from Assets/console.css by Scripts/console-assets.sh: edit that file).
    static let styleText = ##"""
        /* The DeltaSnapshot console's style: system fonts, no external resource. */
        :root { color-scheme: light; --ink: #1d2430; --quiet: #5d6675; --line: #d9dee6; --accent: #2f5fc4; --danger: #b3261e; --paper: #fbfcfe; }
        * { box-sizing: border-box; }
        body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink); background: var(--paper); }
        header { display: flex; align-items: center; gap: 24px; padding: 10px 24px; border-bottom: 1px solid var(--line); background: #fff; }
        header nav { display: flex; gap: 16px; flex: 1; }
        header nav a { color: var(--quiet); text-decoration: none; padding: 4px 0; }
        header nav a[aria-current="page"] { color: var(--ink); border-bottom: 2px solid var(--accent); }
        .brand { font-weight: 600; }
        main { padding: 16px 24px 48px; max-width: 1200px; }
        main.sign-in { max-width: 420px; margin: 10vh auto; padding: 24px; background: #fff; border: 1px solid var(--line); border-radius: 8px; }
        main.sign-in form { display: grid; gap: 10px; }
        h1 { font-size: 22px; margin: 8px 0 16px; }
        h2 { font-size: 16px; margin: 24px 0 8px; }
        section { margin-bottom: 12px; }
        a { color: var(--accent); }
        table { border-collapse: collapse; width: 100%; background: #fff; }
        th, td { text-align: left; padding: 5px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
        th { font-weight: 600; color: var(--quiet); font-size: 12px; text-transform: uppercase; letter-spacing: 0.03em; }
        tr.is-hidden td { color: var(--quiet); }
        dl { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; margin: 0; }
        dt { color: var(--quiet); }
        dd { margin: 0; }
        code, pre { font: 12px/1.4 ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; }
        code.preview { display: inline-block; max-width: 640px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; vertical-align: bottom; }
        pre { background: #fff; border: 1px solid var(--line); padding: 10px; overflow: auto; max-height: 420px; }
        input, textarea, select, button { font: inherit; }
        input, textarea, select { padding: 4px 6px; border: 1px solid var(--line); border-radius: 4px; background: #fff; }
        button { padding: 4px 12px; border: 1px solid var(--accent); border-radius: 4px; background: var(--accent); color: #fff; cursor: pointer; }
        button.danger { background: var(--danger); border-color: var(--danger); }
        button[type="button"]:not(.danger):not([data-confirm]) { background: #fff; color: var(--accent); }
        header button { background: #fff; color: var(--accent); }
        form.search, form.filters, form.bake, .fields, .actions { display: flex; flex-wrap: wrap; align-items: center; gap: 8px; margin: 8px 0; }
        form.user { display: grid; gap: 6px; max-width: 640px; }
        fieldset { border: 1px solid var(--line); display: flex; gap: 8px; }
        .confirm { display: inline-flex; gap: 8px; align-items: center; }
        .question { font-weight: 600; }
        .quiet { color: var(--quiet); }
        .error { color: var(--danger); }
        canvas { display: block; width: 100%; max-width: 720px; height: 160px; background: #fff; border: 1px solid var(--line); margin-top: 8px; }
        .legend { color: var(--quiet); font-size: 12px; }
        .key { display: inline-block; width: 12px; height: 8px; margin-right: 2px; }
        .key.bars { background: #4c7bd9; }
        .key.line { background: #d9534c; height: 2px; vertical-align: middle; }
        """##
}
